package engine

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/docstore"
)

// withFreeStorage adds dbStats' free-space figures for { freeStorage: 1 }
// (mongod 7.0: freeStorageSize after storageSize, indexFreeStorageSize
// after indexSize, totalFreeStorageSize after totalSize; absent otherwise).
// On Pebble, free space allocated to a collection is what its deleted
// documents and index entries still hold on disk: the store's estimate of
// the bytes their tombstones would free once compacted (what compact and
// the TTL reaper's compactions give back), an estimate at the grain of the
// store's tables. Deletions still in the memtable are not counted until
// flushed.
func (e *Engine) withFreeStorage(reply bson.D, colls []*Collection, scale int64) bson.D {
	// Tables holding several ranges' tombstones are shared out among them
	// when the store can (pebblekv); otherwise each range counts the tables
	// it overlaps.
	var ranges [][2][]byte
	for _, c := range colls {
		id := c.Meta().ID
		for _, kind := range []byte{docstore.PfxDoc, docstore.PfxIndex, docstore.PfxExpiry} {
			ranges = append(ranges, [2][]byte{docstore.CollPrefix(kind, id), docstore.PrefixEnd(docstore.CollPrefix(kind, id))})
		}
	}
	free := make([]uint64, len(ranges))
	if br, ok := e.kv.(interface {
		ReclaimableBytesByRange(ranges [][2][]byte) ([]uint64, error)
	}); ok {
		if got, err := br.ReclaimableBytesByRange(ranges); err == nil {
			free = got
		}
	} else {
		for i, r := range ranges {
			free[i], _ = e.kv.ReclaimableBytes(r[0], r[1])
		}
	}
	var docFree, indexFree int64
	for i, n := range free {
		if i%3 == 0 {
			docFree += int64(n)
		} else {
			indexFree += int64(n)
		}
	}
	after := map[string]bson.E{
		"storageSize": {Key: "freeStorageSize", Value: float64(docFree / scale)},
		"indexSize":   {Key: "indexFreeStorageSize", Value: float64(indexFree / scale)},
		"totalSize":   {Key: "totalFreeStorageSize", Value: float64((docFree + indexFree) / scale)},
	}
	out := make(bson.D, 0, len(reply)+3)
	for _, el := range reply {
		out = append(out, el)
		if add, ok := after[el.Key]; ok {
			out = append(out, add)
		}
	}
	return out
}
