package engine

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/docstore"
	"github.com/mayflydb/mayfly/engine/query"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/storage"
	"github.com/mayflydb/mayfly/ttl"
)

// scanStats counts the work a scan did, for explain.
type scanStats struct {
	keysExamined int64
	docsExamined int64
	nReturned    int64
	expired      int64
	// flushedKeys and flushedDocs are what serverStatus has been told of
	// already; collScanned that this query counted as a collection scan.
	flushedKeys, flushedDocs int64
	collScanned              bool
}

// scanner walks a plan and yields stored records, expired or not. It keeps
// only its position between batches (no long-lived store iterator or
// snapshot), so an idle cursor pins nothing and every batch sees the store
// as it is now: documents deleted or expired meanwhile are not returned.
type scanner struct {
	c      *Collection
	p      *plan
	rangeI int
	after  []byte // last key returned within the current range (resume point)
	iter   storage.Iterator
	seen   map[string]bool // de-duplication for multikey indexes and $or
	subI   int
	sub    *scanner
	stats  *scanStats
	done   bool
	// rd is what the scan reads: the request's multi-document transaction
	// (its snapshot and own writes) when it runs in one, else the store.
	rd storage.Reader
}

func (s *scanner) reader() storage.Reader {
	if s.rd != nil {
		return s.rd
	}
	return s.c.e.kv
}

func newScanner(c *Collection, p *plan, stats *scanStats) *scanner {
	s := &scanner{c: c, p: p, stats: stats}
	// Index scans always de-duplicate: a document has several entries in a
	// multikey index, and the multikey flag can lag a concurrent write.
	if p.kind == planIxScan || p.kind == planOr || len(p.ranges) > 1 {
		s.seen = map[string]bool{}
	}
	return s
}

// pause releases the store iterator; the next call resumes after the last
// key returned.
func (s *scanner) pause() {
	s.c.e.flushScan(s.stats, s.p.kind == planCollScan)
	if s.iter != nil {
		s.iter.Close()
		s.iter = nil
	}
	if s.sub != nil {
		s.sub.pause()
	}
}

func (s *scanner) close() { s.pause(); s.done = true }

func (s *scanner) prefix() []byte {
	m := s.c.Meta()
	switch s.p.kind {
	case planIxScan:
		return docstore.IndexPrefix(m.ID, s.p.ix.ID)
	default:
		return docstore.CollPrefix(docstore.PfxDoc, m.ID)
	}
}

func (s *scanner) bounds() (lo, hi []byte) {
	pre := s.prefix()
	if s.p.kind == planCollScan {
		return pre, docstore.PrefixEnd(pre)
	}
	r := s.p.ranges[s.rangeI]
	lo = cat(pre, r.lo)
	if r.hi == nil {
		hi = docstore.PrefixEnd(pre)
	} else {
		hi = cat(pre, r.hi)
	}
	return lo, hi
}

// next returns the next record, or nil at the end.
func (s *scanner) next() (*docstore.Record, error) {
	if s.done || s.p.kind == planEOF {
		return nil, nil
	}
	if s.c.dropped.Load() {
		return nil, nil
	}
	if s.p.kind == planOr {
		return s.nextOr()
	}
	if s.p.points {
		return s.nextPoint()
	}
	nRanges := len(s.p.ranges)
	if s.p.kind == planCollScan {
		nRanges = 1
	}
	order := func(i int) int {
		if s.p.reverse {
			return nRanges - 1 - i
		}
		return i
	}
	for s.rangeI < nRanges {
		saved := s.rangeI
		s.rangeI = order(saved)
		lo, hi := s.bounds()
		s.rangeI = saved
		if s.iter == nil {
			it, err := s.reader().NewIter(lo, hi)
			if err != nil {
				return nil, err
			}
			s.iter = it
			var ok bool
			switch {
			case s.after == nil && !s.p.reverse:
				ok = it.First()
			case s.after == nil:
				ok = it.Last()
			case !s.p.reverse:
				ok = it.SeekGE(append(append([]byte(nil), s.after...), 0))
			default:
				ok = it.SeekLT(s.after)
			}
			if !ok {
				if err := it.Error(); err != nil {
					return nil, err
				}
				s.nextRange()
				continue
			}
		} else {
			var ok bool
			if s.p.reverse {
				ok = s.iter.Prev()
			} else {
				ok = s.iter.Next()
			}
			if !ok {
				if err := s.iter.Error(); err != nil {
					return nil, err
				}
				s.nextRange()
				continue
			}
		}
		key := s.iter.Key()
		s.after = append(s.after[:0], key...)
		r, err := s.fetch(key, s.iter.Value())
		if err != nil {
			return nil, err
		}
		if r == nil {
			continue
		}
		return r, nil
	}
	s.done = true
	s.pause()
	return nil, nil
}

// nextPoint reads the next _id of a points plan with a point Get (the
// store's bloom filters skip tables without it; an iterator cannot).
func (s *scanner) nextPoint() (*docstore.Record, error) {
	n := len(s.p.ranges)
	for s.rangeI < n {
		i := s.rangeI
		if s.p.reverse {
			i = n - 1 - i
		}
		s.rangeI++
		r, err := s.c.getRecord(s.reader(), s.p.ranges[i].lo)
		if err != nil {
			return nil, err
		}
		if r == nil {
			continue
		}
		s.stats.keysExamined++
		s.stats.docsExamined++
		return r, nil
	}
	s.done = true
	return nil, nil
}

func (s *scanner) nextRange() {
	s.iter.Close()
	s.iter = nil
	s.after = nil
	s.rangeI++
}

func (s *scanner) fetch(key, val []byte) (*docstore.Record, error) {
	pre := len(s.prefix())
	if s.p.kind == planIxScan {
		s.stats.keysExamined++
		idKey := val
		if s.seen != nil {
			if s.seen[string(idKey)] {
				return nil, nil
			}
			s.seen[string(idKey)] = true
		}
		r, err := s.c.getRecord(s.reader(), append([]byte(nil), idKey...))
		if err != nil || r == nil {
			return nil, err
		}
		s.stats.docsExamined++
		return r, nil
	}
	if s.p.kind == planIDScan {
		s.stats.keysExamined++
	}
	s.stats.docsExamined++
	r, err := docstore.DecodeRecord(append([]byte(nil), key[pre:]...), append([]byte(nil), val...))
	if err != nil {
		return nil, err
	}
	if s.seen != nil {
		if s.seen[string(r.IDKey)] {
			return nil, nil
		}
		s.seen[string(r.IDKey)] = true
	}
	return r, nil
}

func (s *scanner) nextOr() (*docstore.Record, error) {
	for s.subI < len(s.p.subs) {
		if s.sub == nil {
			s.sub = newScanner(s.c, s.p.subs[s.subI], s.stats)
			s.sub.rd = s.rd
		}
		r, err := s.sub.next()
		if err != nil {
			return nil, err
		}
		if r == nil {
			s.sub = nil
			s.subI++
			continue
		}
		if s.seen[string(r.IDKey)] {
			continue
		}
		s.seen[string(r.IDKey)] = true
		return r, nil
	}
	s.done = true
	return nil, nil
}

// matchedDoc is a live document that passed the filter.
type matchedDoc struct {
	rec *docstore.Record
	doc bson.D // decoded, with _ts appended when the query uses it
	pos int
}

// matchIter yields the live documents of a scan that match a filter: the
// one place reads apply the TTL rule (expired = absent) before filtering.
type matchIter struct {
	c       *Collection
	sc      *scanner
	m       *query.Matcher
	withTS  bool
	stats   *scanStats
	rawOnly bool // no filter: callers may use rec.Raw without decoding
	r       *Request
	seen    int
}

func (c *Collection) newMatchIter(p *plan, m *query.Matcher, withTS bool, stats *scanStats) *matchIter {
	return &matchIter{c: c, sc: newScanner(c, p, stats), m: m, withTS: withTS, stats: stats}
}

func (mi *matchIter) next() (*matchedDoc, error) {
	for {
		if mi.seen++; mi.seen%1024 == 0 && mi.r != nil {
			// A selective filter may examine many documents per result:
			// honour maxTimeMS and cancellation while scanning.
			if err := mi.r.CheckDeadline(); err != nil {
				return nil, err
			}
		}
		r, err := mi.sc.next()
		if err != nil || r == nil {
			return nil, err
		}
		st := mi.c.st()
		dl := st.deadline(r)
		if ttl.Expired(dl, mi.c.e.nowMS()) {
			mi.stats.expired++
			continue
		}
		if mi.m == nil && !mi.withTS && mi.rawOnly {
			return &matchedDoc{rec: r, pos: -1}, nil
		}
		d, err := r.Doc()
		if err != nil {
			return nil, err
		}
		if mi.withTS {
			d = append(d, bson.E{Key: "_ts", Value: r.TS})
		}
		pos := -1
		if mi.m != nil {
			ok, p, err := mi.m.MatchesPosErr(d)
			if err != nil && isInterrupt(err) {
				return nil, err // maxTimeMS or a kill stopped an $expr
			}
			if !ok {
				continue
			}
			pos = p
		}
		return &matchedDoc{rec: r, doc: d, pos: pos}, nil
	}
}

// mentionsTS reports whether a filter, sort or projection names the _ts
// system property (spec §5.2), so documents must carry it while queried.
func mentionsTS(specs ...bson.D) bool {
	for _, s := range specs {
		if containsKey(s, "_ts") {
			return true
		}
	}
	return false
}

func containsKey(v any, key string) bool {
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if e.Key == key || containsKey(e.Value, key) {
				return true
			}
			if s, ok := e.Value.(string); ok && s == "$"+key {
				return true
			}
		}
	case bson.A:
		for _, e := range x {
			if containsKey(e, key) {
				return true
			}
			if s, ok := e.(string); ok && s == "$"+key {
				return true
			}
		}
	}
	return false
}

func stripTS(d bson.D) bson.D { return bsonx.Delete(d, "_ts") }

// withTS returns a copy of d with the _ts system property appended.
func withTS(d bson.D, ts int64) bson.D {
	out := make(bson.D, len(d), len(d)+1)
	copy(out, d)
	return append(out, bson.E{Key: "_ts", Value: ts})
}
