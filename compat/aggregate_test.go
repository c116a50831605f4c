package compat

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func salesData(e *env) {
	e.insert("sales",
		bson.D{{Key: "_id", Value: 1}, {Key: "item", Value: "a"}, {Key: "qty", Value: 2}, {Key: "price", Value: 10.0}, {Key: "cust", Value: "x"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "item", Value: "b"}, {Key: "qty", Value: 1}, {Key: "price", Value: 20.0}, {Key: "cust", Value: "y"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "item", Value: "a"}, {Key: "qty", Value: 5}, {Key: "price", Value: 10.0}, {Key: "cust", Value: "x"}},
		bson.D{{Key: "_id", Value: 4}, {Key: "item", Value: "c"}, {Key: "qty", Value: 3}, {Key: "price", Value: 7.5}, {Key: "cust", Value: "z"}},
	)
	e.insert("customers",
		bson.D{{Key: "_id", Value: "x"}, {Key: "name", Value: "Xavier"}},
		bson.D{{Key: "_id", Value: "y"}, {Key: "name", Value: "Yara"}},
	)
}

func TestAggregate_CountDocumentsPipelineShape(t *testing.T) {
	e := newEnv(t)
	salesData(e)
	// What drivers send for countDocuments.
	docsEq(t, e.aggregate("sales", bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "item", Value: "a"}}}}, bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}}}),
		bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 2}})
	// No match: no group document at all.
	docsEq(t, e.aggregate("sales", bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "item", Value: "zzz"}}}}, bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}}}))
	n, err := e.coll("sales").CountDocuments(e.ctx, bson.D{{Key: "item", Value: "a"}})
	noErr(t, err, "countDocuments")
	eq(t, "countDocuments", n, int64(2))
	n, err = e.coll("nothing").CountDocuments(e.ctx, bson.D{})
	noErr(t, err, "countDocuments on a missing collection")
	eq(t, "countDocuments missing", n, int64(0))
}

func TestAggregate_GroupAccumulators(t *testing.T) {
	e := newEnv(t)
	salesData(e)
	got := e.aggregate("sales", bson.A{
		bson.D{{Key: "$group", Value: bson.D{
			{Key: "_id", Value: "$item"},
			{Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}},
			{Key: "qty", Value: bson.D{{Key: "$sum", Value: "$qty"}}},
			{Key: "revenue", Value: bson.D{{Key: "$sum", Value: bson.D{{Key: "$multiply", Value: bson.A{"$qty", "$price"}}}}}},
			{Key: "avgQty", Value: bson.D{{Key: "$avg", Value: "$qty"}}},
			{Key: "maxQty", Value: bson.D{{Key: "$max", Value: "$qty"}}},
			{Key: "ids", Value: bson.D{{Key: "$push", Value: "$_id"}}},
			{Key: "custs", Value: bson.D{{Key: "$addToSet", Value: "$cust"}}},
			{Key: "first", Value: bson.D{{Key: "$first", Value: "$_id"}}},
		}}},
		bson.D{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	})
	docsEq(t, got,
		bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 2}, {Key: "qty", Value: 7}, {Key: "revenue", Value: 70.0}, {Key: "avgQty", Value: 3.5}, {Key: "maxQty", Value: 5}, {Key: "ids", Value: bson.A{1, 3}}, {Key: "custs", Value: bson.A{"x"}}, {Key: "first", Value: 1}},
		bson.D{{Key: "_id", Value: "b"}, {Key: "n", Value: 1}, {Key: "qty", Value: 1}, {Key: "revenue", Value: 20.0}, {Key: "avgQty", Value: 1.0}, {Key: "maxQty", Value: 1}, {Key: "ids", Value: bson.A{2}}, {Key: "custs", Value: bson.A{"y"}}, {Key: "first", Value: 2}},
		bson.D{{Key: "_id", Value: "c"}, {Key: "n", Value: 1}, {Key: "qty", Value: 3}, {Key: "revenue", Value: 22.5}, {Key: "avgQty", Value: 3.0}, {Key: "maxQty", Value: 3}, {Key: "ids", Value: bson.A{4}}, {Key: "custs", Value: bson.A{"z"}}, {Key: "first", Value: 4}},
	)
}

func TestAggregate_StagesMatchProjectSortSkipLimitUnwindAddFields(t *testing.T) {
	e := newEnv(t)
	e.insert("c",
		bson.D{{Key: "_id", Value: 1}, {Key: "tags", Value: bson.A{"b", "a"}}, {Key: "n", Value: 3}},
		bson.D{{Key: "_id", Value: 2}, {Key: "tags", Value: bson.A{"c"}}, {Key: "n", Value: 1}},
		bson.D{{Key: "_id", Value: 3}, {Key: "n", Value: 2}},
	)
	got := e.aggregate("c", bson.A{
		bson.D{{Key: "$unwind", Value: "$tags"}},
		bson.D{{Key: "$addFields", Value: bson.D{{Key: "double", Value: bson.D{{Key: "$multiply", Value: bson.A{"$n", 2}}}}}}},
		bson.D{{Key: "$sort", Value: bson.D{{Key: "tags", Value: 1}}}},
		bson.D{{Key: "$skip", Value: 1}},
		bson.D{{Key: "$limit", Value: 2}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}, {Key: "tags", Value: 1}, {Key: "double", Value: 1}}}},
	})
	docsEq(t, got, bson.D{{Key: "tags", Value: "b"}, {Key: "double", Value: 6}}, bson.D{{Key: "tags", Value: "c"}, {Key: "double", Value: 2}})
	got = e.aggregate("c", bson.A{bson.D{{Key: "$count", Value: "total"}}})
	docsEq(t, got, bson.D{{Key: "total", Value: 3}})
}

func TestAggregate_Lookup(t *testing.T) {
	e := newEnv(t)
	salesData(e)
	got := e.aggregate("sales", bson.A{
		bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{1, 4}}}}}}},
		bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "customers"}, {Key: "localField", Value: "cust"}, {Key: "foreignField", Value: "_id"}, {Key: "as", Value: "c"}}}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "cust", Value: 1}, {Key: "c", Value: 1}}}},
		bson.D{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	})
	docsEq(t, got,
		bson.D{{Key: "_id", Value: 1}, {Key: "cust", Value: "x"}, {Key: "c", Value: bson.A{bson.D{{Key: "_id", Value: "x"}, {Key: "name", Value: "Xavier"}}}}},
		bson.D{{Key: "_id", Value: 4}, {Key: "cust", Value: "z"}, {Key: "c", Value: bson.A{}}},
	)
	// Pipeline form with let.
	got = e.aggregate("customers", bson.A{
		bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "sales"}, {Key: "let", Value: bson.D{{Key: "cid", Value: "$_id"}}},
			{Key: "pipeline", Value: bson.A{
				bson.D{{Key: "$match", Value: bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$cust", "$$cid"}}}}}}},
				bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "q", Value: bson.D{{Key: "$sum", Value: "$qty"}}}}}},
			}}, {Key: "as", Value: "t"}}}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "q", Value: bson.D{{Key: "$first", Value: "$t.q"}}}}}},
		bson.D{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	})
	docsEq(t, got, bson.D{{Key: "_id", Value: "x"}, {Key: "q", Value: 7}}, bson.D{{Key: "_id", Value: "y"}, {Key: "q", Value: 1}})
}

func TestAggregate_Facet(t *testing.T) {
	e := newEnv(t)
	salesData(e)
	got := e.aggregate("sales", bson.A{bson.D{{Key: "$facet", Value: bson.D{
		{Key: "byItem", Value: bson.A{bson.D{{Key: "$sortByCount", Value: "$item"}}, bson.D{{Key: "$sort", Value: bson.D{{Key: "count", Value: -1}, {Key: "_id", Value: 1}}}}}},
		{Key: "total", Value: bson.A{bson.D{{Key: "$count", Value: "n"}}}},
		{Key: "none", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "qty", Value: 100}}}}}},
	}}}})
	docsEq(t, got, bson.D{
		{Key: "byItem", Value: bson.A{bson.D{{Key: "_id", Value: "a"}, {Key: "count", Value: 2}}, bson.D{{Key: "_id", Value: "b"}, {Key: "count", Value: 1}}, bson.D{{Key: "_id", Value: "c"}, {Key: "count", Value: 1}}}},
		{Key: "total", Value: bson.A{bson.D{{Key: "n", Value: 4}}}},
		{Key: "none", Value: bson.A{}},
	})
}

func TestAggregate_MergeAndOut(t *testing.T) {
	e := newEnv(t)
	salesData(e)
	e.insert("summary", bson.D{{Key: "_id", Value: "a"}, {Key: "old", Value: true}}, bson.D{{Key: "_id", Value: "keep"}, {Key: "old", Value: true}})
	out := e.aggregate("sales", bson.A{
		bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$item"}, {Key: "qty", Value: bson.D{{Key: "$sum", Value: "$qty"}}}}}},
		bson.D{{Key: "$merge", Value: bson.D{{Key: "into", Value: "summary"}, {Key: "on", Value: "_id"}, {Key: "whenMatched", Value: "merge"}, {Key: "whenNotMatched", Value: "insert"}}}},
	})
	if len(out) != 0 {
		t.Fatalf("$merge returns no documents, got %v", out)
	}
	docsEq(t, e.find("summary", nil, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})),
		bson.D{{Key: "_id", Value: "a"}, {Key: "old", Value: true}, {Key: "qty", Value: 7}},
		bson.D{{Key: "_id", Value: "b"}, {Key: "qty", Value: 1}},
		bson.D{{Key: "_id", Value: "c"}, {Key: "qty", Value: 3}},
		bson.D{{Key: "_id", Value: "keep"}, {Key: "old", Value: true}},
	)
	e.aggregate("sales", bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "item", Value: "b"}}}}, bson.D{{Key: "$out", Value: "outcoll"}}})
	strsEq(t, "$out", e.ids("outcoll"), idList(2))
}

func TestAggregate_UnknownStageAndDbLevel(t *testing.T) {
	e := newEnv(t)
	salesData(e)
	_, err := e.coll("sales").Aggregate(e.ctx, bson.A{bson.D{{Key: "$noSuchStage", Value: bson.D{}}}})
	wantCode(t, err, 40324, "Location40324")
	// Database-level aggregate with $documents (5.1+).
	cur, err := e.db.Aggregate(e.ctx, bson.A{bson.D{{Key: "$documents", Value: bson.A{bson.D{{Key: "x", Value: 1}}, bson.D{{Key: "x", Value: 2}}}}}, bson.D{{Key: "$match", Value: bson.D{{Key: "x", Value: 2}}}}})
	noErr(t, err, "db.aggregate $documents")
	var docs []bson.Raw
	noErr(t, cur.All(e.ctx, &docs), "iterate")
	docsEq(t, docs, bson.D{{Key: "x", Value: 2}})
}
