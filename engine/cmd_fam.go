package engine

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/query"
	"github.com/mayflydb/mayfly/engine/update"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

var famFields = map[string]bool{
	"findAndModify": true, "findandmodify": true, "query": true, "sort": true, "remove": true, "update": true,
	"new": true, "fields": true, "upsert": true, "arrayFilters": true, "bypassDocumentValidation": true,
	"hint": true, "collation": true, "bypassEmptyTsReplacement": true, "let": true,
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
	if err := e.applyLet(r, map[string]bool{"query": false, "fields": true, "update": true}); err != nil {
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
	q.hint = hintValue(r.Arg("hint"))
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
		// d carries _ts, returned only when the projection names it
		// (spec §5.2).
		if proj != nil {
			out, err := proj.Apply(d, nil)
			if err != nil || proj.Includes("_ts") {
				return out, err
			}
			return stripTS(out), nil
		}
		return stripTS(d), nil
	}
	if remove {
		c := e.cat.Get(r.DB, coll)
		var got bson.D
		var n int64
		if c != nil {
			if n, err = c.deleteMatching(r, q, true, &got); err != nil {
				return nil, err
			}
		} else if err := validateQuery(q); err != nil {
			return nil, err
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
	fix, err := e.emptyTSFixer(r)
	if err != nil {
		return nil, err
	}
	upd.FixReplacement(fix)
	res, err := e.applyUpdate(r, coll, q, upd, false, upsert, true)
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
