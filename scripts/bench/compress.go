package main

import (
	"context"
	"fmt"
	"math/rand/v2"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// benchCompressors are the wire compressors the compress phase compares,
// "none" (no compressors offered) first: the others' ratios divide by it.
var benchCompressors = []string{"none", "snappy", "zstd", "zlib"}

// compressFind is how many documents the compress phase's find returns.
const compressFind = 100

// compression measures, through a client per compressor (compressors=…),
// point reads by _id and a find returning 100 documents (one batch of
// 100 × ~1 KB), each as a ratio to the same with no compression. Slices of
// every compressor alternate, so that all see the same machine. The
// compressed rows also carry the bytes the server's replies took on the
// wire per uncompressed byte (serverStatus network.compression).
func (b *bench) compression(ctx context.Context) error {
	if b.client == nil {
		return nil
	}
	n := b.cfg.records
	const slices = 2
	type pair struct {
		point, find measure
		// compressor bytes in and out during each
		pointWire, findWire [2]int64
	}
	ms := map[string]*pair{}
	addWire := func(w *[2]int64, before, after [2]int64) {
		w[0] += after[0] - before[0]
		w[1] += after[1] - before[1]
	}
	clients := map[string]*mongo.Client{}
	for _, c := range benchCompressors {
		var comp []string
		if c != "none" {
			comp = []string{c}
		}
		cl, err := connect(b.uri, b.cfg.clients, comp...)
		if err != nil {
			return err
		}
		defer cl.Disconnect(context.Background())
		clients[c], ms[c] = cl, &pair{}
	}
	for i := 0; i < slices; i++ {
		for _, c := range benchCompressors {
			coll := clients[c].Database("bench").Collection("usertable")
			before := b.compressionBytes(ctx, c)
			seed := b.cfg.seed + uint64(10*i)
			m, err := runPhase(fmt.Sprintf("point reads, %s %d/%d", c, i+1, slices), b.cfg.clients, b.cfg.duration/(2*slices), seed, func(w int, r *rand.Rand) (int, error) {
				return 1, b.read(ctx, userKey(r.Int64N(n)), coll)
			})
			if err != nil {
				return err
			}
			ms[c].point.add(m)
			mid := b.compressionBytes(ctx, c)
			addWire(&ms[c].pointWire, before, mid)
			m, err = runPhase(fmt.Sprintf("find %d docs, %s %d/%d", compressFind, c, i+1, slices), b.cfg.clients, b.cfg.duration/(2*slices), seed+1, func(w int, r *rand.Rand) (int, error) {
				start := r.Int64N(max(n-compressFind, 1))
				cur, err := coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: userKey(start)}}}},
					options.Find().SetLimit(compressFind).SetBatchSize(compressFind).SetSort(bson.D{{Key: "_id", Value: 1}}))
				if err != nil {
					return 0, err
				}
				var docs []bson.Raw
				if err := cur.All(ctx, &docs); err != nil {
					return 0, err
				}
				return len(docs), nil
			})
			if err != nil {
				return err
			}
			ms[c].find.add(m)
			addWire(&ms[c].findWire, mid, b.compressionBytes(ctx, c))
		}
	}
	base := ms["none"]
	row := func(c string, w [2]int64) (vs, note string, extra map[string]float64) {
		if c == "none" {
			return "", "no compressor offered", nil
		}
		note = "compressors=" + c + "; ratio: ops/s ÷ the uncompressed row's"
		if w[0] > 0 {
			extra = map[string]float64{"replyWireBytesPerByte": float64(w[1]) / float64(w[0])}
			note += fmt.Sprintf("; the replies took %.0f%% of their size on the wire", 100*float64(w[1])/float64(w[0]))
		}
		return "uncompressed", note, extra
	}
	for _, c := range benchCompressors {
		vs, note, extra := row(c, ms[c].pointWire)
		b.rep.add(Result{Name: "point read by _id, " + c, Group: "compression", Unit: "ops", Note: note, Extra: extra}, &ms[c].point, vs, base.point.perSec())
		vs, note, extra = row(c, ms[c].findWire)
		b.rep.add(Result{Name: fmt.Sprintf("find %d docs, %s", compressFind, c), Group: "compression", Unit: "docs", Note: note, Extra: extra}, &ms[c].find, vs, base.find.perSec())
	}
	return nil
}

// compressionBytes reads the server's compressor bytes in and out for c
// (serverStatus network.compression.<c>.compressor); zeros for "none" or
// when the server does not report them.
func (b *bench) compressionBytes(ctx context.Context, c string) [2]int64 {
	if c == "none" {
		return [2]int64{}
	}
	raw, err := b.client.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Raw()
	if err != nil {
		return [2]int64{}
	}
	in, err1 := raw.LookupErr("network", "compression", c, "compressor", "bytesIn")
	out, err2 := raw.LookupErr("network", "compression", c, "compressor", "bytesOut")
	if err1 != nil || err2 != nil {
		return [2]int64{}
	}
	return [2]int64{in.AsInt64(), out.AsInt64()}
}
