package engine

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/query"
	"github.com/mayflydb/mayfly/engine/update"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

var famFields = map[string]bool{
	"findAndModify": true, "findandmodify": true, "query": true, "sort": true, "remove": true, "update": true,
	"new": true, "fields": true, "upsert": true, "arrayFilters": true, "bypassDocumentValidation": true,
	"hint": true, "collation": true, "let": false,
}

// cmdFindAndModify finds one document (the first in sort order), then
// updates, replaces or removes it, returning it before or after. The chosen
// document is re-checked under its write protection; if a concurrent writer
// changed it away, the query runs again, so under contention every caller
// gets a different document.
func cmdFindAndModify(e *Engine, r *Request) (bson.D, error) {
	if err := checkFields(r, famFields); err != nil {
		return nil, err
	}
	coll, err := collName(r)
	if err != nil {
		return nil, err
	}
	q := &querySpec{limit: 1}
	if q.filter, err = docArg(r, "query"); err != nil {
		return nil, err
	}
	if q.sort, err = docArg(r, "sort"); err != nil {
		return nil, err
	}
	fields, err := docArg(r, "fields")
	if err != nil {
		return nil, err
	}
	q.hint, _ = r.Arg("hint")
	if d, ok := q.hint.(bson.D); ok && len(d) == 0 {
		q.hint = nil
	}
	remove := boolArg(r, "remove")
	returnNew := boolArg(r, "new")
	upsert := boolArg(r, "upsert")
	uv, hasUpdate := r.Arg("update")
	if remove && hasUpdate {
		return nil, mongoerr.New(mongoerr.FailedToParse, "Cannot specify both an update and remove=true")
	}
	if !remove && !hasUpdate {
		return nil, mongoerr.New(mongoerr.FailedToParse, "Either an update or remove=true must be specified")
	}
	if remove && upsert {
		return nil, mongoerr.New(mongoerr.FailedToParse, "Cannot specify both upsert=true and remove=true ")
	}
	if remove && returnNew {
		return nil, mongoerr.New(mongoerr.FailedToParse, "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document")
	}
	var proj *query.Projection
	if len(fields) > 0 {
		if proj, err = query.CompileProjection(fields); err != nil {
			return nil, err
		}
	}
	render := func(d bson.D) (any, error) {
		if d == nil {
			return nil, nil
		}
		if proj != nil {
			return proj.Apply(d, nil)
		}
		return d, nil
	}
	if remove {
		c := e.cat.Get(r.DB, coll)
		var got bson.D
		var n int64
		if c != nil {
			if n, err = c.deleteOneSorted(r, q, &got); err != nil {
				return nil, err
			}
		}
		v, err := render(got)
		if err != nil {
			return nil, err
		}
		return bson.D{{Key: "lastErrorObject", Value: bson.D{{Key: "n", Value: int32(n)}}}, {Key: "value", Value: v}}, nil
	}
	af, _ := r.Arg("arrayFilters")
	afa, _ := af.(bson.A)
	upd, err := update.Compile(uv, afa)
	if err != nil {
		return nil, err
	}
	res, err := e.applyUpdateSorted(r, coll, q, upd, upsert)
	if err != nil {
		return nil, err
	}
	var out bson.D
	if returnNew {
		out = res.after
	} else {
		out = res.before
	}
	v, err := render(out)
	if err != nil {
		return nil, err
	}
	leo := bson.D{{Key: "n", Value: int32(res.matched)}}
	if res.upsertedID != nil {
		leo = bson.D{{Key: "n", Value: int32(1)}, {Key: "updatedExisting", Value: false}, {Key: "upserted", Value: res.upsertedID}}
	} else {
		leo = append(leo, bson.E{Key: "updatedExisting", Value: res.matched > 0})
	}
	return bson.D{{Key: "lastErrorObject", Value: leo}, {Key: "value", Value: v}}, nil
}

// applyUpdateSorted is applyUpdate for one document chosen in sort order.
func (e *Engine) applyUpdateSorted(r *Request, coll string, q *querySpec, upd *update.Update, upsert bool) (*updateResult, error) {
	if len(q.sort) == 0 {
		return e.applyUpdate(r, coll, q, upd, false, upsert, true)
	}
	// With a sort, pick the first matching document in sort order, then
	// update exactly that one (by _id and the original filter).
	var c *Collection
	if c = e.cat.Get(r.DB, coll); c == nil {
		if !upsert {
			return &updateResult{}, nil
		}
		return e.applyUpdate(r, coll, q, upd, false, upsert, true)
	}
	for attempt := 0; attempt < 100; attempt++ {
		cq, err := c.compileQuery(r, q)
		if err != nil {
			return nil, err
		}
		ids, err := cq.matchedIDs(r, 1)
		if err != nil {
			return nil, err
		}
		if len(ids) == 0 {
			if !upsert {
				return &updateResult{}, nil
			}
			return e.applyUpdate(r, coll, &querySpec{filter: q.filter, hint: q.hint}, upd, false, true, true)
		}
		res := &updateResult{}
		found, err := c.withDoc(cq, ids[0], false, func(s *collState, rec *record, doc bson.D, pos int) error {
			nd, modified, err := upd.Apply(doc, pos, false, e.clock.Now())
			if err != nil {
				return err
			}
			if err := checkIDUnchanged(doc, nd); err != nil {
				return err
			}
			if nd, err = prepareNewDoc(s, nd, false); err != nil {
				return err
			}
			if err := c.commitDoc(r, s, rec, nd); err != nil {
				return err
			}
			res.matched = 1
			if modified {
				res.modified = 1
			}
			res.before, res.after = doc, nd
			return nil
		})
		if err != nil {
			return nil, err
		}
		if found {
			return res, nil
		}
	}
	return nil, mongoerr.New(112, "too many concurrent changes to the matched document; retry the write")
}

// deleteOneSorted removes the first live match in sort order.
func (c *Collection) deleteOneSorted(r *Request, q *querySpec, got *bson.D) (int64, error) {
	for attempt := 0; attempt < 100; attempt++ {
		cq, err := c.compileQuery(r, q)
		if err != nil {
			return 0, err
		}
		ids, err := cq.matchedIDs(r, 1)
		if err != nil || len(ids) == 0 {
			return 0, err
		}
		found, err := c.withDoc(cq, ids[0], false, func(s *collState, rec *record, doc bson.D, _ int) error {
			*got = doc
			return c.deleteRecord(r, s, rec)
		})
		if err != nil {
			return 0, err
		}
		if found {
			return 1, nil
		}
	}
	return 0, mongoerr.New(112, "too many concurrent changes to the matched document; retry the write")
}

var _ = bsonx.Get
