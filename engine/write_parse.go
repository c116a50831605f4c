package engine

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// mongod parses a whole write command (its IDL: WriteCommandRequestBase,
// UpdateOpEntry, DeleteOpEntry) before it runs any statement, so a statement
// with an unknown field or a field of the wrong type fails the whole command
// (ok: 0) and no earlier statement is applied. What fails later, while a
// statement runs (an unknown update modifier, a stage not allowed in an
// update pipeline, …), is a write error of that statement.

// checkBatchSize is mongod's write_ops::checkOpCountForCommand.
func checkBatchSize(n int) error {
	if n == 0 || n > 100000 {
		return mongoerr.New(mongoerr.InvalidLength, "Write batch sizes must be between 1 and 100000. Got %d operations.", n)
	}
	return nil
}

func wrongType(field string, v any, want string) error {
	return mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s' is the wrong type '%s', expected type '%s'", field, bsonx.TypeName(v), want)
}

// checkInsertDocuments: documents is array<object>.
func checkInsertDocuments(docs bson.A) error {
	for i, v := range docs {
		if _, ok := v.(bson.D); !ok {
			return wrongType(fmt.Sprintf("insert.documents.%d", i), v, "object")
		}
	}
	return nil
}

// checkUpdateStatements validates every statement of an update command.
func checkUpdateStatements(stmts bson.A) error {
	if err := checkBatchSize(len(stmts)); err != nil {
		return err
	}
	for i, v := range stmts {
		st, ok := v.(bson.D)
		if !ok {
			return wrongType(fmt.Sprintf("update.updates.%d", i), v, "object")
		}
		if err := stmtFields(nil, st, updateStmtFields, "update.updates"); err != nil {
			return err
		}
		if err := checkStmtTypes(st, "update.updates"); err != nil {
			return err
		}
		if _, ok := bsonx.Get(st, "q"); !ok {
			return mongoerr.New(40414, "BSON field 'update.updates.q' is missing but a required field")
		}
		u, ok := bsonx.Get(st, "u")
		if !ok {
			return mongoerr.New(40414, "BSON field 'update.updates.u' is missing but a required field")
		}
		switch x := u.(type) {
		case bson.D:
		case bson.A:
			for _, s := range x {
				if _, isDoc := s.(bson.D); !isDoc {
					return mongoerr.New(mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
				}
			}
		default:
			return mongoerr.New(mongoerr.FailedToParse, "Update argument must be either an object or an array")
		}
	}
	return nil
}

// checkDeleteStatements validates every statement of a delete command.
func checkDeleteStatements(stmts bson.A) error {
	if err := checkBatchSize(len(stmts)); err != nil {
		return err
	}
	for i, v := range stmts {
		st, ok := v.(bson.D)
		if !ok {
			return wrongType(fmt.Sprintf("delete.deletes.%d", i), v, "object")
		}
		if err := stmtFields(nil, st, deleteStmtFields, "delete.deletes"); err != nil {
			return err
		}
		if err := checkStmtTypes(st, "delete.deletes"); err != nil {
			return err
		}
		if _, ok := bsonx.Get(st, "q"); !ok {
			return mongoerr.New(40414, "BSON field 'delete.deletes.q' is missing but a required field")
		}
		lv, ok := bsonx.Get(st, "limit")
		if !ok {
			return mongoerr.New(40414, "BSON field 'delete.deletes.limit' is missing but a required field")
		}
		// readMultiDeleteProperty: the limit read as a double, 0 or 1.
		limit, _ := bsonx.ToFloat(lv)
		if limit != 0 && limit != 1 {
			return mongoerr.New(mongoerr.FailedToParse, "The limit field in delete objects must be 0 or 1. Got %v", lv)
		}
	}
	return nil
}

// checkStmtTypes applies the IDL types of the statement fields both
// statement kinds share or that only update has.
func checkStmtTypes(st bson.D, prefix string) error {
	for _, f := range st {
		name := prefix + "." + f.Key
		switch f.Key {
		case "q", "c", "collation":
			if _, ok := f.Value.(bson.D); !ok {
				return wrongType(name, f.Value, "object")
			}
		case "multi", "upsert":
			if _, ok := f.Value.(bool); !ok {
				return wrongType(name, f.Value, "bool")
			}
		case "arrayFilters":
			a, ok := f.Value.(bson.A)
			if !ok {
				return wrongType(name, f.Value, "array")
			}
			for i, v := range a {
				if _, isDoc := v.(bson.D); !isDoc {
					return wrongType(fmt.Sprintf("%s.%d", name, i), v, "object")
				}
			}
		}
	}
	return nil
}
