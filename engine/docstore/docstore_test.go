package docstore

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/mongoerr"
	"github.com/mayflydb/mayfly/storage"
	"github.com/mayflydb/mayfly/storage/pebblekv"
	"github.com/mayflydb/mayfly/ttl"
)

func openTestStore(t *testing.T, now *int64) (*Store, storage.TxnKV) {
	t.Helper()
	kv, err := pebblekv.Open("", pebblekv.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	return New(kv, func() int64 { return *now }), kv
}

func keyCount(t *testing.T, kv storage.TxnKV, lo, hi []byte) int {
	t.Helper()
	it, err := kv.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n
}

// TestWriteDocUniqueAndDelete drives the store through its exported API
// alone: a write stages the document, its index entry and its expiry
// entry; a second live holder of a unique value is E11000 (with mongod's
// message), two documents of one transaction claiming a value too; an
// expired holder does not count (spec §6.3); DeleteDoc removes every
// entry.
func TestWriteDocUniqueAndDelete(t *testing.T) {
	now := int64(1_700_000_000_000)
	st, kv := openTestStore(t, &now)
	ix := &Index{ID: 1, Name: "u_1", Key: bson.D{{Key: "u", Value: int32(1)}}, Unique: true}
	coll := &Coll{ID: 7, NS: "db.c", Indexes: []*Index{ix}, Policy: &ttl.Policy{HasDefault: true, DefaultTTL: 60}}
	write := func(d bson.D, old *Record) error {
		tx, err := st.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := st.WriteDoc(tx, coll, old, d, now/1000, nil); err != nil {
			return err
		}
		return tx.Commit(context.Background(), false)
	}
	if err := write(bson.D{{Key: "_id", Value: int32(1)}, {Key: "u", Value: "x"}}, nil); err != nil {
		t.Fatal(err)
	}
	doc := CollPrefix(PfxDoc, 7)
	idx := CollPrefix(PfxIndex, 7)
	exp := CollPrefix(PfxExpiry, 7)
	if d, i, e := keyCount(t, kv, doc, PrefixEnd(doc)), keyCount(t, kv, idx, PrefixEnd(idx)), keyCount(t, kv, exp, PrefixEnd(exp)); d != 1 || i != 1 || e != 1 {
		t.Fatalf("after a write: %d documents, %d index entries, %d expiry entries; want 1 each", d, i, e)
	}
	err := write(bson.D{{Key: "_id", Value: int32(2)}, {Key: "u", Value: "x"}}, nil)
	var me *mongoerr.Error
	if !errors.As(err, &me) || me.Code != mongoerr.DuplicateKey ||
		me.Msg != `E11000 duplicate key error collection: db.c index: u_1 dup key: { u: "x" }` {
		t.Fatalf("second holder: %v, want E11000 on u_1", err)
	}
	// Two documents of one transaction.
	tx, _ := st.Begin()
	if _, err := st.WriteDoc(tx, coll, nil, bson.D{{Key: "_id", Value: int32(3)}, {Key: "u", Value: "y"}}, now/1000, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteDoc(tx, coll, nil, bson.D{{Key: "_id", Value: int32(4)}, {Key: "u", Value: "y"}}, now/1000, nil); !errors.As(err, &me) || me.Code != mongoerr.DuplicateKey {
		t.Fatalf("same value twice in one transaction: %v, want E11000", err)
	}
	if _, err := st.IDFree(tx, coll, IDKeyOf(int32(3)), bson.D{{Key: "_id", Value: int32(3)}}); !errors.As(err, &me) || me.Code != mongoerr.DuplicateKey {
		t.Fatalf("_id taken earlier in the transaction: %v, want E11000", err)
	}
	tx.Rollback()
	// Expired holder: the value is free again.
	now += 61_000
	if err := write(bson.D{{Key: "_id", Value: int32(2)}, {Key: "u", Value: "x"}}, nil); err != nil {
		t.Fatalf("value held by an expired document: %v", err)
	}
	rec, err := GetRecord(kv, 7, IDKeyOf(int32(2)))
	if err != nil || rec == nil || rec.TS != now/1000 {
		t.Fatalf("GetRecord: %+v, %v", rec, err)
	}
	for _, id := range []int32{1, 2} {
		r, _ := GetRecord(kv, 7, IDKeyOf(id))
		tx, _ := st.Begin()
		if err := DeleteDoc(tx, coll, r); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(context.Background(), false); err != nil {
			t.Fatal(err)
		}
	}
	if d, i, e := keyCount(t, kv, doc, PrefixEnd(doc)), keyCount(t, kv, idx, PrefixEnd(idx)), keyCount(t, kv, exp, PrefixEnd(exp)); d != 0 || i != 0 || e != 0 {
		t.Fatalf("after deleting: %d documents, %d index entries, %d expiry entries; want none", d, i, e)
	}
}
