package docstore

import "bytes"

// diffKeysLinearMax is the size under which diffKeys compares key sets by
// linear search: for the usual handful of keys that beats building a set.
const diffKeysLinearMax = 16

// diffKeys returns the index keys an update deletes (old keys absent from
// the new version) and adds (new keys absent from the old one), each in the
// order of its input. Both inputs are duplicate-free (IndexKeys dedups).
// When the old version was not live (expired), all its keys are deleted and
// all new keys added. It runs in linear time (a hash set of the other side)
// where the old linear search was quadratic in the number of keys of a
// multikey document (issue 21: a $push onto a 100k-element indexed array).
func diffKeys(oldKeys, newKeys [][]byte, oldLive bool) (del, add [][]byte) {
	if !oldLive {
		return oldKeys, newKeys
	}
	if len(oldKeys) <= diffKeysLinearMax && len(newKeys) <= diffKeysLinearMax {
		for _, k := range oldKeys {
			if !containsKey2(newKeys, k) {
				del = append(del, k)
			}
		}
		for _, k := range newKeys {
			if !containsKey2(oldKeys, k) {
				add = append(add, k)
			}
		}
		return del, add
	}
	inNew := make(map[string]struct{}, len(newKeys))
	for _, k := range newKeys {
		inNew[string(k)] = struct{}{}
	}
	inOld := make(map[string]struct{}, len(oldKeys))
	for _, k := range oldKeys {
		inOld[string(k)] = struct{}{}
		if _, ok := inNew[string(k)]; !ok {
			del = append(del, k)
		}
	}
	for _, k := range newKeys {
		if _, ok := inOld[string(k)]; !ok {
			add = append(add, k)
		}
	}
	return del, add
}

func containsKey2(keys [][]byte, k []byte) bool {
	for _, x := range keys {
		if bytes.Equal(x, k) {
			return true
		}
	}
	return false
}
