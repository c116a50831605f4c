package docstore

import (
	"encoding/binary"

	"github.com/mayflydb/mayfly/engine/keycodec"
)

// The key space. Everything lives in one ordered store; the first byte says
// what a key is, so each kind is a contiguous range:
//
//	0x01 <db> 0x00 <coll>                         catalog entry (BSON collMeta)
//	0x02 <name>                                   server metadata (next ids, clock high-water mark)
//	0x10 <collID:8> <_id>                         document: header + BSON
//	0x11 <collID:8> <indexID:4> <key…> <_id>      secondary index entry; value = encoded _id
//	0x12 <collID:8> <kind:1> <instant:8> <_id>    expiry index entry; value = document size (4 bytes)
//	0x13 <collID:8> <what:1>                      guard key: never stored, only locked (Txn.LockKeys)
//	0x14 <lsid:16> <txnNumber:8> <stmtId:4>       retryable-write record: BSON {t, n, m[, u][, r]} (engine/retry.go)
//	0x15 <T:4> <I:4> <seq:4>                      change history (replica-set mode): the seq-th document change of the
//	                                              commit at cluster time {T, I}; BSON {o, db, c, k, w[, f][, u][, l, n]}, drop/rename/dropDatabase {o, db, c, w[, t]} (engine/changes.go)
//
// <_id> and <key…> use keycodec, an order-preserving encoding of BSON values
// in MongoDB's comparison order, so _id lookups and ranges and index scans
// are range reads. Numbers are big-endian so ids and instants sort.
const (
	PfxCatalog = 0x01
	PfxMeta    = 0x02
	PfxDoc     = 0x10
	PfxIndex   = 0x11
	PfxExpiry  = 0x12
	PfxGuard   = 0x13
	PfxRetry   = 0x14
	PfxChange  = 0x15
)

// UpsertGuardKey is the key an upsert that inserts locks: two concurrent
// upserts that both found nothing conflict on it (applyUpdate).
func UpsertGuardKey(collID uint64) []byte { return append(CollPrefix(PfxGuard, collID), 'u') }

// Expiry index kinds: documents with their own valid ttl are keyed by their
// deadline; documents that inherit DefaultTTL are keyed by _ts, so changing
// DefaultTTL rewrites nothing (a pass scans _ts <= now - DefaultTTL).
const (
	ExpDeadline = 'd'
	ExpTS       = 't'
)

func CatalogKey(db, coll string) []byte {
	k := make([]byte, 0, 2+len(db)+len(coll))
	k = append(k, PfxCatalog)
	k = append(k, db...)
	k = append(k, 0)
	return append(k, coll...)
}

func MetaKey(name string) []byte { return append([]byte{PfxMeta}, name...) }

func CollPrefix(kind byte, id uint64) []byte {
	k := make([]byte, 9, 64)
	k[0] = kind
	binary.BigEndian.PutUint64(k[1:], id)
	return k
}

func DocKey(collID uint64, idKey []byte) []byte {
	return append(CollPrefix(PfxDoc, collID), idKey...)
}

func IndexPrefix(collID uint64, indexID uint32) []byte {
	k := CollPrefix(PfxIndex, collID)
	return binary.BigEndian.AppendUint32(k, indexID)
}

func ExpiryPrefix(collID uint64, kind byte) []byte {
	return append(CollPrefix(PfxExpiry, collID), kind)
}

// AppendInstant encodes a signed instant so that byte order is numeric order.
func AppendInstant(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v)^(1<<63))
}

func ReadInstant(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

func ExpiryKey(collID uint64, kind byte, instant int64, idKey []byte) []byte {
	k := AppendInstant(ExpiryPrefix(collID, kind), instant)
	return append(k, idKey...)
}

func PrefixEnd(p []byte) []byte { return keycodec.PrefixEnd(p) }
