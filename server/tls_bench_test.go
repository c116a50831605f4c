package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mayflydb/mayfly/internal/testpki"
)

// benchPKI makes a CA and a server certificate for 127.0.0.1 at run time
// (internal/testpki; nothing checked in): the PEM file of the server's
// certificate and key, and a pool trusting the CA.
func benchPKI(b *testing.B) (string, *x509.CertPool) {
	b.Helper()
	dir := b.TempDir()
	ca := testpki.NewCA(b, dir, "bench-ca")
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return ca.IssueNow(b, dir, "server", true), pool
}

// BenchmarkIssue15TLSPointRead measures point reads (findOne by _id over
// 1000 small documents) through the Go driver, against a plain server and
// one with --tlsMode requireTLS (TLS 1.3, P-256 certificate), one client at
// a time (serial) and with GOMAXPROCS goroutines sharing a pool (parallel).
// The ratio TLS/plain is the cost of TLS on point reads; the handshake is
// paid once per pooled connection, before the timer.
func BenchmarkIssue15TLSPointRead(b *testing.B) {
	pemFile, pool := benchPKI(b)
	plain, err := Start(Config{Bind: "127.0.0.1", InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	secure, err := Start(Config{Bind: "127.0.0.1", InMemory: true, TLS: TLSOptions{Mode: "requireTLS", CertificateKeyFile: pemFile}})
	if err != nil {
		b.Fatal(err)
	}
	defer secure.Close()
	for _, bc := range []struct {
		name string
		opts *options.ClientOptions
	}{
		{"plain", options.Client().ApplyURI(plain.URI())},
		{"TLS", options.Client().ApplyURI(secure.URI()).SetTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})},
	} {
		ctx := context.Background()
		cli, err := mongo.Connect(bc.opts)
		if err != nil {
			b.Fatal(err)
		}
		coll := cli.Database("bench").Collection("c")
		docs := make([]any, 1000)
		for i := range docs {
			docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "v", Value: fmt.Sprintf("value-%d", i)}}
		}
		if _, err := coll.InsertMany(ctx, docs); err != nil {
			b.Fatal(err)
		}
		read := func(i int) {
			var got bson.Raw
			if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: i % 1000}}).Decode(&got); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(bc.name+"/serial", func(b *testing.B) {
			read(0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				read(i)
			}
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					read(i)
					i += 7
				}
			})
		})
		_ = cli.Disconnect(ctx)
	}
}
