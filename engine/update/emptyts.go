package update

import "go.mongodb.org/mongo-driver/v2/bson"

// FixReplacement lets the caller rewrite a replacement document once, before
// it is applied (mongod's ObjectReplaceExecutor replaces empty timestamps
// when it is built). It does nothing for operator and pipeline updates.
func (u *Update) FixReplacement(fix func(bson.D) (bson.D, bool)) {
	if !u.isRepl || fix == nil {
		return
	}
	if d, changed := fix(u.replacement); changed {
		u.replacement = d
	}
}
