package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// benchPKI makes a CA and a server certificate for 127.0.0.1 at run time
// (nothing checked in): the PEM file of the server's certificate and key,
// and a pool trusting the CA.
func benchPKI(b *testing.B) (string, *x509.CertPool) {
	b.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		return k
	}
	caKey, srvKey := key(), key()
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		b.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		b.Fatal(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		b.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		b.Fatal(err)
	}
	pemFile := filepath.Join(b.TempDir(), "server.pem")
	data := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
	if err := os.WriteFile(pemFile, data, 0o600); err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pemFile, pool
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
