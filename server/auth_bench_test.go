package server

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// BenchmarkIssue15AuthConnect measures a new connection's cost: connect,
// handshake and one ping, plain and with SCRAM-SHA-256 / SCRAM-SHA-1
// authentication (speculative, as the Go driver does it) against --auth.
// The difference is the authentication cost per connection, mostly the
// PBKDF2 iterations the client runs (15000 / 10000).
func BenchmarkIssue15AuthConnect(b *testing.B) {
	s, err := Start(Config{InMemory: true, Auth: true, InitRootUser: "root", InitRootPassword: "pw"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	plain, err := Start(Config{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	for _, bc := range []struct {
		name string
		srv  *Server
		cred *options.Credential
	}{
		{"plain", plain, nil},
		{"SCRAM-SHA-256", s, &options.Credential{Username: "root", Password: "pw", AuthMechanism: "SCRAM-SHA-256"}},
		{"SCRAM-SHA-1", s, &options.Credential{Username: "root", Password: "pw", AuthMechanism: "SCRAM-SHA-1"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				o := options.Client().ApplyURI(bc.srv.URI()).SetMaxPoolSize(1)
				if bc.cred != nil {
					o.SetAuth(*bc.cred)
				}
				cli, err := mongo.Connect(o)
				if err != nil {
					b.Fatal(err)
				}
				if err := cli.Database("admin").RunCommand(context.Background(), bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
					b.Fatal(err)
				}
				_ = cli.Disconnect(context.Background())
			}
		})
	}
}
