package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

const (
	fieldCount = 10
	fieldLen   = 100
	loadBatch  = 1000
)

var fieldNames = func() []string {
	f := make([]string, fieldCount)
	for i := range f {
		f[i] = "field" + strconv.Itoa(i)
	}
	return f
}()

type bench struct {
	cfg    *config
	rep    *report
	dir    string
	uri    string
	client *mongo.Client
	coll   *mongo.Collection

	loaded   bool
	nextKey  atomic.Int64 // next record number to insert
	acked    atomic.Int64 // highest record number whose insert finished, +1
	zipf     *zipfian
	wireCeil float64
	getCeil  float64
	setCeil  float64
}

func (b *bench) runAll(ctx context.Context) error {
	w := b.cfg.workloads
	b.zipf = newZipfian(b.cfg.records)
	// With point reads, the wire ceiling is measured interleaved with them
	// (pointReads); otherwise on its own, first.
	if !w["pointread"] && (w["ping"] || w["a"] || w["b"] || w["c"] || w["d"] || w["e"] || w["f"] || w["range"] || w["agg"]) {
		if err := b.ping(ctx); err != nil {
			return err
		}
	}
	if w["kv"] || w["load"] {
		if err := b.kvCeiling(ctx); err != nil {
			return err
		}
	}
	if b.client != nil {
		if err := b.profiled("load", func() error { return b.load(ctx) }); err != nil {
			return err
		}
	}
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"pointread", b.pointReads},
		{"a", b.ycsb('A')}, {"b", b.ycsb('B')}, {"c", b.ycsb('C')},
		{"f", b.ycsb('F')}, {"d", b.ycsb('D')}, {"e", b.ycsb('E')},
		{"range", b.rangeQueries},
		{"agg", b.aggregation},
		{"compress", b.compression},
		{"ttlscan", b.ttlScan},
		{"ttlpurge", b.ttlPurge},
		{"auth", b.authConnects},
		{"tls", b.tlsPointReads},
		{"txn", b.transactions},
	}
	for _, s := range steps {
		if !w[s.name] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.profiled(s.name, func() error { return s.fn(ctx) }); err != nil {
			return err
		}
	}
	return nil
}

// profiled runs fn under the CPU profiler when --cpuprofile-phase names it.
func (b *bench) profiled(phase string, fn func() error) error {
	if b.cfg.cpuprofile == "" || b.cfg.profPhase != phase {
		return fn()
	}
	f, err := os.Create(b.cfg.cpuprofile)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	defer pprof.StopCPUProfile()
	return fn()
}

// ping is the wire ceiling: the same driver and clients doing the cheapest
// round trip the server has.
func (b *bench) ping(ctx context.Context) error {
	if b.client == nil {
		return nil
	}
	admin := b.client.Database("admin")
	cmd := bson.D{{Key: "ping", Value: 1}}
	m, err := runPhase("wire ceiling: ping", b.cfg.clients, b.cfg.duration, b.cfg.seed, func(int, *rand.Rand) (int, error) {
		return 1, admin.RunCommand(ctx, cmd).Err()
	})
	if err != nil {
		return err
	}
	b.wireCeil = m.perSec()
	b.rep.add(Result{Name: "wire ceiling (ping)", Group: "baseline", Unit: "ops"}, m, "", 0)
	return nil
}

// field0 is indexed for the range queries: a 12-digit number that is a
// permutation of the record number (so an index range touches documents
// scattered over the _id space), padded to fieldLen.
func (b *bench) field0(n int64, r *rand.Rand, buf []byte) string {
	v := n
	if n < b.cfg.records {
		v = int64((uint64(n) * permMul(b.cfg.records)) % uint64(b.cfg.records))
	}
	p := pad12(v)
	copy(buf, p)
	letters(r, buf[len(p):])
	return string(buf)
}

// permMul is a multiplier coprime with n, so n ↦ n·m mod records is a bijection.
func permMul(n int64) uint64 {
	for _, m := range []uint64{1_000_003, 999_983, 1_000_033, 7} {
		if uint64(n)%m != 0 && gcd(m, uint64(n)) == 1 {
			return m
		}
	}
	return 1
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func pad12(v int64) string {
	s := strconv.FormatInt(v, 10)
	for len(s) < 12 {
		s = "0" + s
	}
	return s
}

// doc is record n of the usertable: _id "user<n>" and 10 fields of 100
// random letters.
func (b *bench) doc(n int64, r *rand.Rand) bson.D {
	d := make(bson.D, 0, fieldCount+1)
	d = append(d, bson.E{Key: "_id", Value: userKey(n)})
	buf := make([]byte, fieldLen*fieldCount)
	d = append(d, bson.E{Key: fieldNames[0], Value: b.field0(n, r, buf[:fieldLen])})
	letters(r, buf[fieldLen:])
	s := string(buf[fieldLen:])
	for i := 1; i < fieldCount; i++ {
		d = append(d, bson.E{Key: fieldNames[i], Value: s[(i-1)*fieldLen : i*fieldLen]})
	}
	return d
}

func randField(r *rand.Rand) string {
	var buf [fieldLen]byte
	letters(r, buf[:])
	return string(buf[:])
}

// load bulk-loads the usertable with insertMany in batches of 1000, the
// clients taking batches from a shared counter.
func (b *bench) load(ctx context.Context) error {
	need := false
	for _, p := range []string{"load", "pointread", "a", "b", "c", "d", "e", "f", "range", "agg", "ttlscan"} {
		need = need || b.cfg.workloads[p]
	}
	if !need {
		return nil
	}
	var next atomic.Int64
	n := b.cfg.records
	m, err := runPhase("load: insertMany x1000", b.cfg.clients, 0, b.cfg.seed, func(w int, r *rand.Rand) (int, error) {
		lo := next.Add(loadBatch) - loadBatch
		if lo >= n {
			return 0, errDone
		}
		hi := min(lo+loadBatch, n)
		docs := make([]any, 0, hi-lo)
		for i := lo; i < hi; i++ {
			docs = append(docs, b.doc(i, r))
		}
		_, err := b.coll.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
		return int(hi - lo), err
	})
	if err != nil {
		return err
	}
	b.nextKey.Store(n)
	b.acked.Store(n)
	b.loaded = true
	b.rep.add(Result{Name: "insertMany (batches of 1000)", Group: "load", Unit: "docs"}, m, "engine: Pebble batched Set", b.setCeil)
	return nil
}

func (b *bench) key(r *rand.Rand) string { return userKey(b.zipf.scrambled(r)) }

func (b *bench) read(ctx context.Context, k string, coll ...*mongo.Collection) error {
	c := b.coll
	if len(coll) > 0 {
		c = coll[0]
	}
	err := c.FindOne(ctx, bson.D{{Key: "_id", Value: k}}).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil // a "latest" key whose insert is still in flight
	}
	return err
}

func (b *bench) update(ctx context.Context, k string, r *rand.Rand) error {
	f := fieldNames[r.IntN(fieldCount-1)+1]
	_, err := b.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: k}}, bson.D{{Key: "$set", Value: bson.D{{Key: f, Value: randField(r)}}}})
	return err
}

func (b *bench) insert(ctx context.Context, r *rand.Rand) error {
	n := b.nextKey.Add(1) - 1
	if _, err := b.coll.InsertOne(ctx, b.doc(n, r)); err != nil {
		return err
	}
	for {
		a := b.acked.Load()
		if a >= n+1 || b.acked.CompareAndSwap(a, n+1) {
			return nil
		}
	}
}

func (b *bench) scan(ctx context.Context, k string, r *rand.Rand) error {
	limit := int64(r.IntN(100) + 1)
	cur, err := b.coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: k}}}},
		options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(limit).SetBatchSize(int32(limit)))
	if err != nil {
		return err
	}
	defer cur.Close(ctx)
	for cur.Next(ctx) {
	}
	return cur.Err()
}

// pointReads: findOne by _id, keys uniform over the loaded records. It
// runs in five slices alternating with slices of the wire ceiling (ping), so
// that both see the same machine: their ratio is the figure that matters,
// and on a shared machine the load changes from second to second.
func (b *bench) pointReads(ctx context.Context) error {
	n := b.cfg.records
	admin := b.client.Database("admin")
	ping := bson.D{{Key: "ping", Value: 1}}
	const slices = 5
	var pm, rm, em measure
	empty := b.client.Database("bench").Collection("missing")
	for i := 0; i < slices; i++ {
		m, err := runPhase(fmt.Sprintf("wire ceiling: ping %d/%d", i+1, slices), b.cfg.clients, b.cfg.duration/slices, b.cfg.seed+uint64(i), func(int, *rand.Rand) (int, error) {
			return 1, admin.RunCommand(ctx, ping).Err()
		})
		if err != nil {
			return err
		}
		pm.add(m)
		m, err = runPhase(fmt.Sprintf("point reads by _id %d/%d", i+1, slices), b.cfg.clients, b.cfg.duration/slices, b.cfg.seed+1+uint64(i), func(w int, r *rand.Rand) (int, error) {
			return 1, b.read(ctx, userKey(r.Int64N(n)), b.coll)
		})
		if err != nil {
			return err
		}
		rm.add(m)
		m, err = runPhase(fmt.Sprintf("find on a missing collection %d/%d", i+1, slices), b.cfg.clients, b.cfg.duration/slices, b.cfg.seed+2+uint64(i), func(w int, r *rand.Rand) (int, error) {
			return 1, b.read(ctx, userKey(r.Int64N(n)), empty)
		})
		if err != nil {
			return err
		}
		em.add(m)
	}
	b.wireCeil = pm.perSec()
	b.rep.add(Result{Name: "wire ceiling (ping)", Group: "baseline", Unit: "ops", Note: "interleaved with the point reads"}, &pm, "", 0)
	// Keep the ceilings together at the top of the table.
	last := b.rep.Results[len(b.rep.Results)-1]
	copy(b.rep.Results[1:], b.rep.Results[:len(b.rep.Results)-1])
	b.rep.Results[0] = last
	res := Result{Name: "point read by _id (uniform)", Group: "query", Unit: "ops"}
	if b.getCeil > 0 {
		res.Extra = map[string]float64{"ratioToEngineGet": rm.perSec() / b.getCeil}
	}
	b.rep.add(res, &rm, "wire: ping", b.wireCeil)
	b.rep.add(Result{Name: "findOne on a missing collection", Group: "query", Unit: "ops",
		Note: "the driver's and the protocol's cost of a find, with no storage work: point read ÷ this = the storage share"}, &em, "wire: ping", b.wireCeil)
	return nil
}

// ycsb runs one of YCSB's core workloads. Keys are chosen with YCSB's
// scrambled zipfian (θ 0.99) over the loaded records, except D, which reads
// the latest inserts (zipfian over recency).
func (b *bench) ycsb(wl byte) func(context.Context) error {
	return func(ctx context.Context) error {
		desc := map[byte]string{
			'A': "YCSB A: 50% read / 50% update",
			'B': "YCSB B: 95% read / 5% update",
			'C': "YCSB C: 100% read",
			'D': "YCSB D: 95% read latest / 5% insert",
			'E': "YCSB E: 95% scan ≤100 / 5% insert",
			'F': "YCSB F: 50% read / 50% read-modify-write",
		}[wl]
		m, err := runPhase("YCSB "+string(wl), b.cfg.clients, b.cfg.duration, b.cfg.seed+uint64(wl), func(w int, r *rand.Rand) (int, error) {
			p := r.Float64()
			switch wl {
			case 'A':
				if p < 0.5 {
					return 1, b.read(ctx, b.key(r))
				}
				return 1, b.update(ctx, b.key(r), r)
			case 'B':
				if p < 0.95 {
					return 1, b.read(ctx, b.key(r))
				}
				return 1, b.update(ctx, b.key(r), r)
			case 'C':
				return 1, b.read(ctx, b.key(r))
			case 'D':
				if p < 0.95 {
					k := b.acked.Load() - 1 - b.zipf.next(r)
					if k < 0 {
						k = 0
					}
					return 1, b.read(ctx, userKey(k))
				}
				return 1, b.insert(ctx, r)
			case 'E':
				if p < 0.95 {
					return 1, b.scan(ctx, b.key(r), r)
				}
				return 1, b.insert(ctx, r)
			case 'F':
				k := b.key(r)
				if p < 0.5 {
					return 1, b.read(ctx, k)
				}
				if err := b.read(ctx, k); err != nil {
					return 1, err
				}
				return 1, b.update(ctx, k, r)
			}
			return 0, fmt.Errorf("unknown workload %c", wl)
		})
		if err != nil {
			return err
		}
		b.rep.add(Result{Name: desc, Group: "ycsb", Unit: "ops"}, m, "wire: ping", b.wireCeil)
		return nil
	}
}

// rangeQueries: an index on field0, then finds of ~10 documents by a range
// of it (the documents are scattered over the _id space).
func (b *bench) rangeQueries(ctx context.Context) error {
	prog.note("createIndex field0")
	t0 := time.Now()
	if _, err := b.coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "field0", Value: 1}}}); err != nil {
		return fmt.Errorf("createIndex field0: %w", err)
	}
	build := time.Since(t0)
	prog.end()
	n := b.cfg.records
	var docs atomic.Int64
	m, err := runPhase("indexed range queries", b.cfg.clients, b.cfg.duration, b.cfg.seed+2, func(w int, r *rand.Rand) (int, error) {
		s := r.Int64N(n - 10)
		cur, err := b.coll.Find(ctx, bson.D{{Key: "field0", Value: bson.D{{Key: "$gte", Value: pad12(s)}, {Key: "$lt", Value: pad12(s + 10)}}}})
		if err != nil {
			return 1, err
		}
		k := 0
		for cur.Next(ctx) {
			k++
		}
		docs.Add(int64(k))
		cur.Close(ctx)
		return 1, cur.Err()
	})
	if err != nil {
		return err
	}
	res := Result{Name: "indexed range query (10 docs)", Group: "query", Unit: "ops",
		Note: fmt.Sprintf("createIndex on %d docs took %.2fs", b.acked.Load(), build.Seconds())}
	if m.calls > 0 {
		res.Extra = map[string]float64{"docsPerQuery": float64(docs.Load()) / float64(m.calls), "indexBuildSeconds": build.Seconds()}
	}
	b.rep.add(res, m, "wire: ping", b.wireCeil)
	return nil
}

// aggregation: $match on an index range of ~1000 documents, then $group
// into 26 groups. "n/a" if the server has no aggregate command yet.
func (b *bench) aggregation(ctx context.Context) error {
	n := b.cfg.records
	span := min(int64(1000), n/10)
	pipe := func(s int64) mongo.Pipeline {
		return mongo.Pipeline{
			{{Key: "$match", Value: bson.D{{Key: "field0", Value: bson.D{{Key: "$gte", Value: pad12(s)}, {Key: "$lt", Value: pad12(s + span)}}}}}},
			{{Key: "$group", Value: bson.D{
				{Key: "_id", Value: bson.D{{Key: "$substrBytes", Value: bson.A{"$field1", 0, 1}}}},
				{Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}},
			}}},
		}
	}
	res := Result{Name: fmt.Sprintf("aggregate $match(%d)+$group", span), Group: "query", Unit: "ops"}
	probe, err := b.coll.Aggregate(ctx, pipe(0))
	if err == nil {
		probe.Close(ctx)
	} else {
		var ce mongo.CommandError
		if errors.As(err, &ce) && ce.Code == 59 {
			res.Note = "aggregate: CommandNotFound"
		} else {
			res.Note = "aggregate failed: " + err.Error()
		}
		b.rep.addNA(res)
		return nil
	}
	m, err := runPhase("aggregation $group", b.cfg.clients, b.cfg.duration, b.cfg.seed+3, func(w int, r *rand.Rand) (int, error) {
		cur, err := b.coll.Aggregate(ctx, pipe(r.Int64N(n-span)))
		if err != nil {
			return 1, err
		}
		for cur.Next(ctx) {
		}
		cur.Close(ctx)
		return 1, cur.Err()
	})
	if err != nil {
		return err
	}
	b.rep.add(res, m, "wire: ping", b.wireCeil)
	return nil
}
