package engine

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// mayfly has no authentication yet: there are no users or roles to show,
// and commands that would create them fail loudly rather than pretend.
func init() {
	Register(
		&Command{Name: "usersInfo", Help: "list users (mayfly has no authentication yet: always empty)", Run: func(e *Engine, r *Request) (bson.D, error) {
			return bson.D{{Key: "users", Value: bson.A{}}}, nil
		}},
		&Command{Name: "rolesInfo", Help: "list roles (always empty)", Run: func(e *Engine, r *Request) (bson.D, error) {
			return bson.D{{Key: "roles", Value: bson.A{}}}, nil
		}},
		&Command{Name: "createUser", Help: "not supported: mayfly has no authentication yet", Write: true, Run: func(e *Engine, r *Request) (bson.D, error) {
			return nil, mongoerr.New(mongoerr.NotImplemented, "createUser is not supported: mayfly has no authentication yet")
		}},
	)
}
