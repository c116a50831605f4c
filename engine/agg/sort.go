package agg

import (
	"bufio"
	"container/heap"
	"context"
	"encoding/binary"
	"io"
	"os"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/query"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

type sortStage struct {
	spec  bson.D
	s     *query.Sort
	limit int64 // >0: only the first limit documents are needed (top-k)
}

func (*sortStage) name() string { return "$sort" }

func parseSort(spec any, opts *Options) (stage, error) {
	d, ok := spec.(bson.D)
	if !ok {
		return nil, mongoerr.New(15973, "the $sort key specification must be an object")
	}
	if len(d) == 0 {
		return nil, mongoerr.New(15976, "$sort stage must have at least one sort key")
	}
	s, err := query.CompileSort(d)
	if err != nil {
		return nil, err
	}
	return &sortStage{spec: d, s: s}, nil
}

func init() {
	stageParsers["$sort"] = parseSort
}

func sortMemError(limit int64) error {
	return mongoerr.New(mongoerr.QueryExceededMemoryLimit,
		"PlanExecutor error during aggregation :: caused by :: Sort exceeded memory limit of %d bytes, but did not opt in to external sorting.", limit)
}

func (s *sortStage) run(ctx context.Context, rc *runCtx, in Iterator) (Iterator, error) {
	srt := &sorter{
		cmp:      s.s.CompareKeys,
		limit:    rc.opts.MemoryLimit,
		disk:     rc.opts.AllowDiskUse,
		dir:      rc.opts.TempDir,
		topK:     s.limit,
		memError: sortMemError,
	}
	started := false
	var out Iterator
	fi := &funcIter{}
	*fi = funcIter{
		next: func(ctx context.Context) (bson.D, bool, error) {
			if !started {
				started = true
				for {
					d, ok, err := in.Next(ctx)
					if err != nil {
						return nil, false, err
					}
					if !ok {
						break
					}
					if err := srt.addFrom(s.s.Keys(d), d, sourceOf(in)); err != nil {
						return nil, false, err
					}
				}
				in.Close()
				var err error
				if out, err = srt.finish(); err != nil {
					return nil, false, err
				}
				fi.src = out // each output document's Source, for a later stage that buffers
			}
			return out.Next(ctx)
		},
		close: func() {
			in.Close()
			if out != nil {
				out.Close()
			}
			srt.cleanup()
		},
	}
	return fi, nil
}

// sorter is an external sort over (key, document) records: records are
// kept in memory until the memory limit, then (with disk use allowed)
// sorted and written as a run to a temporary file; finish merges the runs.
// With topK > 0 only the best topK records are kept (a bounded heap), which
// never spills.
type sorter struct {
	cmp      func(a, b []any) int
	limit    int64
	disk     bool
	dir      string
	topK     int64
	memError func(limit int64) error

	recs  []rec
	mem   int64
	seq   int64
	runs  []string
	files []*os.File
	// spilledSrc keeps the Source of spilled records (by seq).
	spilledSrc map[int64]Source
}

type rec struct {
	key []any
	doc bson.D
	seq int64  // input order, for stability
	src Source // where doc came from (nil: untracked); re-checked on output
}

func (s *sorter) less(a, b *rec) bool {
	if c := s.cmp(a.key, b.key); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}

// worstHeap is a max-heap on sort order (the root is the worst kept record).
type worstHeap struct {
	s    *sorter
	recs []rec
}

func (h *worstHeap) Len() int           { return len(h.recs) }
func (h *worstHeap) Less(i, j int) bool { return h.s.less(&h.recs[j], &h.recs[i]) }
func (h *worstHeap) Swap(i, j int)      { h.recs[i], h.recs[j] = h.recs[j], h.recs[i] }
func (h *worstHeap) Push(x any)         { h.recs = append(h.recs, x.(rec)) }
func (h *worstHeap) Pop() any {
	r := h.recs[len(h.recs)-1]
	h.recs = h.recs[:len(h.recs)-1]
	return r
}

func (s *sorter) add(key []any, doc bson.D) error { return s.addFrom(key, doc, nil) }

// addFrom adds a record whose document came from src: finish's iterator
// skips it if src is no longer live by then.
func (s *sorter) addFrom(key []any, doc bson.D, src Source) error {
	r := rec{key: key, doc: doc, seq: s.seq, src: src}
	s.seq++
	if s.topK > 0 {
		h := &worstHeap{s: s, recs: s.recs}
		if int64(len(h.recs)) < s.topK {
			heap.Push(h, r)
			s.mem += query.DocSize(doc)
		} else if s.less(&r, &h.recs[0]) {
			s.mem += query.DocSize(doc) - query.DocSize(h.recs[0].doc)
			h.recs[0] = r
			heap.Fix(h, 0)
		}
		s.recs = h.recs
		if s.mem > s.limit && !s.disk {
			return s.memError(s.limit)
		}
		return nil
	}
	s.recs = append(s.recs, r)
	s.mem += query.DocSize(doc)
	if s.mem > s.limit {
		if !s.disk {
			return s.memError(s.limit)
		}
		return s.spill()
	}
	return nil
}

func (s *sorter) sortMem() {
	recs := s.recs
	// stable by construction: seq breaks ties
	sortRecs(recs, s.less)
}

func (s *sorter) spill() error {
	s.sortMem()
	f, err := os.CreateTemp(s.dir, "mayfly-sort-*")
	if err != nil {
		return mongoerr.New(mongoerr.InternalError, "cannot create spill file: %v", err)
	}
	s.files = append(s.files, f)
	s.runs = append(s.runs, f.Name())
	w := bufio.NewWriter(f)
	for _, r := range s.recs {
		if r.src != nil {
			if s.spilledSrc == nil {
				s.spilledSrc = map[int64]Source{}
			}
			s.spilledSrc[r.seq] = r.src
		}
		b, err := bson.Marshal(bson.D{{Key: "k", Value: encodeKey(r.key)}, {Key: "s", Value: r.seq}, {Key: "d", Value: r.doc}})
		if err != nil {
			return mongoerr.New(mongoerr.InternalError, "cannot encode spill record: %v", err)
		}
		if _, err := w.Write(b); err != nil {
			return mongoerr.New(mongoerr.InternalError, "cannot write spill file: %v", err)
		}
	}
	if err := w.Flush(); err != nil {
		return mongoerr.New(mongoerr.InternalError, "cannot write spill file: %v", err)
	}
	s.recs = nil
	s.mem = 0
	return nil
}

// encodeKey makes a key marshalable (Missing becomes null, which sorts the
// same).
func encodeKey(k []any) bson.A {
	out := make(bson.A, len(k))
	for i, v := range k {
		if bsonx.IsMissing(v) {
			v = nil
		}
		out[i] = v
	}
	return out
}

func (s *sorter) finish() (Iterator, error) {
	if s.topK > 0 {
		h := &worstHeap{s: s, recs: s.recs}
		out := &liveSlice{docs: make([]bson.D, len(h.recs)), lives: make([]Source, len(h.recs))}
		for i := len(out.docs) - 1; i >= 0; i-- {
			r := heap.Pop(h).(rec)
			out.docs[i], out.lives[i] = r.doc, r.src
		}
		s.recs = nil
		return out, nil
	}
	if len(s.runs) == 0 {
		s.sortMem()
		out := &liveSlice{docs: make([]bson.D, len(s.recs)), lives: make([]Source, len(s.recs))}
		for i, r := range s.recs {
			out.docs[i], out.lives[i] = r.doc, r.src
		}
		s.recs = nil
		return out, nil
	}
	if len(s.recs) > 0 {
		if err := s.spill(); err != nil {
			return nil, err
		}
	}
	m := &mergeIter{s: s}
	for _, f := range s.files {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, mongoerr.New(mongoerr.InternalError, "spill: %v", err)
		}
		src := &runReader{r: bufio.NewReader(f)}
		r, ok, err := src.next()
		if err != nil {
			return nil, err
		}
		if ok {
			m.heads = append(m.heads, mergeHead{r: r, src: src})
		}
	}
	heap.Init(m)
	return m, nil
}

func (s *sorter) cleanup() {
	for _, f := range s.files {
		f.Close()
		os.Remove(f.Name())
	}
	s.files, s.runs, s.recs = nil, nil, nil
}

type runReader struct{ r *bufio.Reader }

func (rr *runReader) next() (rec, bool, error) {
	var lenBuf [4]byte
	if _, err := io.ReadFull(rr.r, lenBuf[:]); err != nil {
		if err == io.EOF {
			return rec{}, false, nil
		}
		return rec{}, false, mongoerr.New(mongoerr.InternalError, "spill read: %v", err)
	}
	n := binary.LittleEndian.Uint32(lenBuf[:])
	buf := make([]byte, n)
	copy(buf, lenBuf[:])
	if _, err := io.ReadFull(rr.r, buf[4:]); err != nil {
		return rec{}, false, mongoerr.New(mongoerr.InternalError, "spill read: %v", err)
	}
	var d bson.D
	if err := bson.Unmarshal(buf, &d); err != nil {
		return rec{}, false, mongoerr.New(mongoerr.InternalError, "spill decode: %v", err)
	}
	k, _ := bsonx.Get(d, "k")
	seq, _ := bsonx.Get(d, "s")
	doc, _ := bsonx.Get(d, "d")
	r := rec{key: []any(k.(bson.A)), doc: doc.(bson.D)}
	r.seq, _ = bsonx.ToInt64(seq)
	return r, true, nil
}

type mergeHead struct {
	r   rec
	src *runReader
}

// mergeIter is a k-way merge of sorted runs.
type mergeIter struct {
	s     *sorter
	heads []mergeHead
	last  Source
}

func (m *mergeIter) Len() int           { return len(m.heads) }
func (m *mergeIter) Less(i, j int) bool { return m.s.less(&m.heads[i].r, &m.heads[j].r) }
func (m *mergeIter) Swap(i, j int)      { m.heads[i], m.heads[j] = m.heads[j], m.heads[i] }
func (m *mergeIter) Push(x any)         { m.heads = append(m.heads, x.(mergeHead)) }
func (m *mergeIter) Pop() any {
	h := m.heads[len(m.heads)-1]
	m.heads = m.heads[:len(m.heads)-1]
	return h
}

func (m *mergeIter) Next(ctx context.Context) (bson.D, bool, error) {
	for {
		if len(m.heads) == 0 {
			return nil, false, nil
		}
		top := m.heads[0]
		nr, ok, err := top.src.next()
		if err != nil {
			return nil, false, err
		}
		if ok {
			m.heads[0].r = nr
			heap.Fix(m, 0)
		} else {
			heap.Pop(m)
		}
		src := m.s.spilledSrc[top.r.seq]
		if src != nil {
			delete(m.s.spilledSrc, top.r.seq)
			if !src.Live() {
				continue
			}
		}
		m.last = src
		return top.r.doc, true, nil
	}
}

// Source is that of the last document returned (see Tracked).
func (m *mergeIter) Source() Source { return m.last }

func (m *mergeIter) Close() { m.s.cleanup() }

func sortRecs(recs []rec, less func(a, b *rec) bool) {
	sortSlice(len(recs), func(i, j int) bool { return less(&recs[i], &recs[j]) }, func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
}
