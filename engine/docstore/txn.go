package docstore

import "github.com/mayflydb/mayfly/storage"

// Txn is a storage transaction of document writes with the _id and
// unique-index values its writes took: a holder of one of them that a
// transaction finds live may be its own uncommitted write, which is a
// duplicate (E11000), not a holder that let go since the snapshot (a
// conflict, retried). Engine writes always run in one (the engine may
// embed it in a type of its own: the store finds it through the embedding).
type Txn struct {
	storage.Txn
	claimed map[string]string // claim → the encoded _id that took it
	// Multi marks a multi-document transaction's storage transaction: its
	// writes read its snapshot and own writes (ReaderOf).
	Multi bool
}

// docTxn is how the store finds its Txn in a storage.Txn, whether a *Txn
// or a type embedding one.
func (t *Txn) docTxn() *Txn { return t }

type txnHolder interface{ docTxn() *Txn }

func asTxn(tx storage.Txn) (*Txn, bool) {
	if h, ok := tx.(txnHolder); ok {
		return h.docTxn(), true
	}
	return nil, false
}

// Begin starts a storage transaction of document writes.
func (st *Store) Begin() (*Txn, error) {
	tx, err := st.kv.Begin()
	if err != nil {
		return nil, err
	}
	return &Txn{Txn: tx}, nil
}

// claim records that tx's write of the document idKey took k (an idClaim
// or an index prefix and value).
func claim(tx storage.Txn, k string, idKey []byte) {
	if dt, ok := asTxn(tx); ok {
		if dt.claimed == nil {
			dt.claimed = map[string]string{}
		}
		dt.claimed[k] = string(idKey)
	}
}

// claimed reports whether tx's writes took k.
func claimed(tx storage.Txn, k string) bool {
	_, ok := claimedBy(tx, k)
	return ok
}

// claimedBy returns the encoded _id of the document whose write in tx
// took k.
func claimedBy(tx storage.Txn, k string) (string, bool) {
	if dt, ok := asTxn(tx); ok {
		id, in := dt.claimed[k]
		return id, in
	}
	return "", false
}

// ReaderOf is where a write in tx reads the documents and index entries
// its decision rests on. A single-document write (every write outside a
// multi-document transaction) reads the latest committed state: it writes
// the key of every document it read (and locks every unique value it
// probed), so any commit that changed them after it began makes it
// conflict and run again, and reading the newest state spares it a
// snapshot and the overlay of its own writes (an insert's earlier
// documents are found by their claims). A multi-document transaction reads
// its snapshot and its own writes (latest false).
func (st *Store) ReaderOf(tx storage.Txn) (rd storage.Reader, latest bool) {
	if dt, ok := asTxn(tx); ok && !dt.Multi {
		return st.kv, true
	}
	return tx, false
}

// idClaim is the claim key of an encoded _id (index claims start with the
// index prefix byte, never 0).
func idClaim(idKey []byte) string { return "\x00" + string(idKey) }
