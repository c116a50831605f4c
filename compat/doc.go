// Package compat is mayfly's MongoDB compatibility suite. It talks to a
// server only through the official Go driver (go.mongodb.org/mongo-driver/v2),
// so it runs unchanged against any MongoDB-compatible server:
//
//	go test ./compat/                                  # in-process mayfly, fake clock
//	MAYFLY_URI=mongodb://127.0.0.1:27017 go test ./compat/ -parallel 16
//
// Tests that need time to pass call env.advance: in-process it moves the
// server's fake clock, against MAYFLY_URI it really sleeps (the TTL tests then
// use TTLs of 1–3 s). Every test works in its own database, so tests run in
// parallel. Tests whose names contain "Differs" check where mayfly
// deliberately departs from MongoDB (time to live as Azure Cosmos DB defines
// it); with COMPAT_REFERENCE=mongod they, and the other mayfly-only TTL tests,
// are skipped so the suite can be checked against a real mongod.
package compat
