package engine

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
//	0x14 <lsid:16> <txnNumber:8> <stmtId:4>       retryable-write record: BSON {t, n, m[, u][, r]} (retry.go)
//
// <_id> and <key…> use keycodec, an order-preserving encoding of BSON values
// in MongoDB's comparison order, so _id lookups and ranges and index scans
// are range reads. Numbers are big-endian so ids and instants sort.
const (
	pfxCatalog = 0x01
	pfxMeta    = 0x02
	pfxDoc     = 0x10
	pfxIndex   = 0x11
	pfxExpiry  = 0x12
	pfxGuard   = 0x13
	pfxRetry   = 0x14
)

// upsertGuardKey is the key an upsert that inserts locks: two concurrent
// upserts that both found nothing conflict on it (applyUpdate).
func upsertGuardKey(collID uint64) []byte { return append(collPrefix(pfxGuard, collID), 'u') }

// Expiry index kinds: documents with their own valid ttl are keyed by their
// deadline; documents that inherit DefaultTTL are keyed by _ts, so changing
// DefaultTTL rewrites nothing (a pass scans _ts <= now - DefaultTTL).
const (
	expDeadline = 'd'
	expTS       = 't'
)

func catalogKey(db, coll string) []byte {
	k := make([]byte, 0, 2+len(db)+len(coll))
	k = append(k, pfxCatalog)
	k = append(k, db...)
	k = append(k, 0)
	return append(k, coll...)
}

func metaKey(name string) []byte { return append([]byte{pfxMeta}, name...) }

func collPrefix(kind byte, id uint64) []byte {
	k := make([]byte, 9, 64)
	k[0] = kind
	binary.BigEndian.PutUint64(k[1:], id)
	return k
}

func docKey(collID uint64, idKey []byte) []byte {
	return append(collPrefix(pfxDoc, collID), idKey...)
}

func indexPrefix(collID uint64, indexID uint32) []byte {
	k := collPrefix(pfxIndex, collID)
	return binary.BigEndian.AppendUint32(k, indexID)
}

func expiryPrefix(collID uint64, kind byte) []byte {
	return append(collPrefix(pfxExpiry, collID), kind)
}

// appendInstant encodes a signed instant so that byte order is numeric order.
func appendInstant(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v)^(1<<63))
}

func readInstant(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

func expiryKey(collID uint64, kind byte, instant int64, idKey []byte) []byte {
	k := appendInstant(expiryPrefix(collID, kind), instant)
	return append(k, idKey...)
}

func prefixEnd(p []byte) []byte { return keycodec.PrefixEnd(p) }
