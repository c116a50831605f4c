package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/internal/testpki"
	"github.com/mayflydb/mayfly/server"
)

// The security phases compare in-process servers that differ only in the
// feature measured, all in-memory so that storage does not blur it, their
// slices interleaved so that each pair sees the same machine:
//
//   - auth: a new client (its own pool), its handshake and one ping, against
//     a server without --auth and, with speculative SCRAM-SHA-256 or
//     SCRAM-SHA-1 authentication, against one with it. The ratio is
//     connections/s with authentication ÷ without; p50 is the cost of one
//     connection.
//   - tls: point reads by _id (usertable records) against a plain server
//     and one with --tlsMode requireTLS (a P-256 certificate made at run
//     time, TLS 1.3), by one client and by --clients; the ratio is TLS
//     ops/s ÷ plain ops/s.
const securitySlices = 5

// startSecurityServer starts an in-memory mayfly on a loopback port.
func startSecurityServer(cfg server.Config) (*server.Server, error) {
	cfg.Bind, cfg.InMemory, cfg.Logger = "127.0.0.1", true, zap.NewNop()
	return server.Start(cfg)
}

// authConnects measures a new connection's cost with and without
// authentication.
func (b *bench) authConnects(ctx context.Context) error {
	plain, err := startSecurityServer(server.Config{})
	if err != nil {
		return err
	}
	defer plain.Close()
	const user, pwd = "bench", "bench-password"
	secured, err := startSecurityServer(server.Config{Auth: true, InitRootUser: user, InitRootPassword: pwd})
	if err != nil {
		return err
	}
	defer secured.Close()
	kinds := []struct {
		name string
		opts func() *options.ClientOptions
	}{
		{"no authentication", func() *options.ClientOptions { return options.Client().ApplyURI(plain.URI()) }},
		{"SCRAM-SHA-256", func() *options.ClientOptions {
			return options.Client().ApplyURI(secured.URI()).SetAuth(options.Credential{Username: user, Password: pwd, AuthMechanism: "SCRAM-SHA-256"})
		}},
		{"SCRAM-SHA-1", func() *options.ClientOptions {
			return options.Client().ApplyURI(secured.URI()).SetAuth(options.Credential{Username: user, Password: pwd, AuthMechanism: "SCRAM-SHA-1"})
		}},
	}
	ms := make([]measure, len(kinds))
	ping := bson.D{{Key: "ping", Value: 1}}
	for i := 0; i < securitySlices; i++ {
		for k, kind := range kinds {
			m, err := runPhase(fmt.Sprintf("new connection, %s %d/%d", kind.name, i+1, securitySlices), b.cfg.clients, b.cfg.duration/securitySlices,
				b.cfg.seed+uint64(i*len(kinds)+k), func(int, *rand.Rand) (int, error) {
					cli, err := mongo.Connect(kind.opts().SetMaxPoolSize(1).SetDirect(true))
					if err != nil {
						return 0, err
					}
					err = cli.Database("admin").RunCommand(ctx, ping).Err()
					if derr := cli.Disconnect(context.Background()); err == nil {
						err = derr
					}
					return 1, err
				})
			if err != nil {
				return err
			}
			ms[k].add(m)
		}
	}
	base := ms[0].perSec()
	for k, kind := range kinds {
		res := Result{Name: "new connection + ping, " + kind.name, Group: "security", Unit: "ops"}
		if k == 0 {
			res.Note = "in-memory server without --auth; p50 is one connection's cost"
			b.rep.add(res, &ms[k], "", 0)
			continue
		}
		res.Note = "speculative authentication in hello, as the driver does; ratio: connections/s ÷ without --auth"
		b.rep.add(res, &ms[k], "no auth", base)
	}
	return nil
}

// tlsPointReads measures point reads over TLS against plain ones.
func (b *bench) tlsPointReads(ctx context.Context) error {
	certs, pool, err := benchCertificates(filepath.Join(b.dir, "tls"))
	if err != nil {
		return err
	}
	plain, err := startSecurityServer(server.Config{})
	if err != nil {
		return err
	}
	defer plain.Close()
	secure, err := startSecurityServer(server.Config{TLS: server.TLSOptions{Mode: "requireTLS", CertificateKeyFile: certs}})
	if err != nil {
		return err
	}
	defer secure.Close()
	records := min(b.cfg.records, 10_000)
	var colls []*mongo.Collection
	for _, o := range []*options.ClientOptions{
		options.Client().ApplyURI(plain.URI()),
		options.Client().ApplyURI(secure.URI()).SetTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
	} {
		cli, err := mongo.Connect(o.SetMaxPoolSize(uint64(b.cfg.clients) + 4).SetDirect(true))
		if err != nil {
			return err
		}
		defer cli.Disconnect(context.Background())
		coll := cli.Database("bench").Collection("usertable")
		r := rand.New(rand.NewPCG(b.cfg.seed, 99))
		for lo := int64(0); lo < records; lo += loadBatch {
			docs := make([]any, 0, loadBatch)
			for i := lo; i < min(lo+loadBatch, records); i++ {
				docs = append(docs, b.doc(i, r))
			}
			if _, err := coll.InsertMany(ctx, docs); err != nil {
				return fmt.Errorf("tls: load: %w", err)
			}
		}
		colls = append(colls, coll)
	}
	// One client shows the added latency of a round trip; all of them
	// whether it survives when client and server saturate the cores.
	names := []string{"plain", "TLS"}
	for _, clients := range []int{1, b.cfg.clients} {
		ms := make([]measure, len(colls))
		for i := 0; i < securitySlices; i++ {
			for k, coll := range colls {
				m, err := runPhase(fmt.Sprintf("point reads, %s, %d clients %d/%d", names[k], clients, i+1, securitySlices), clients, b.cfg.duration/securitySlices,
					b.cfg.seed+uint64(i*2+k), func(w int, r *rand.Rand) (int, error) {
						err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: userKey(r.Int64N(records))}}).Err()
						if errors.Is(err, mongo.ErrNoDocuments) {
							return 0, fmt.Errorf("%s: a loaded record is missing", names[k])
						}
						return 1, err
					})
				if err != nil {
					return err
				}
				ms[k].add(m)
			}
		}
		suffix := fmt.Sprintf(" (%d clients)", clients)
		if clients == 1 {
			suffix = " (1 client)"
		}
		note := fmt.Sprintf("in-memory servers, %d records; ", records)
		b.rep.add(Result{Name: "point read by _id, plain" + suffix, Group: "security", Unit: "ops", Note: note + "the TLS row's reference"}, &ms[0], "", 0)
		b.rep.add(Result{Name: "point read by _id, TLS" + suffix, Group: "security", Unit: "ops",
			Note: note + "--tlsMode requireTLS, TLS 1.3, handshakes before the timer; ratio: ops/s ÷ plain"}, &ms[1], "plain", ms[0].perSec())
		if clients == b.cfg.clients {
			break
		}
	}
	return nil
}

// benchCertificates makes a CA and a server certificate for 127.0.0.1 in
// dir (internal/testpki, as the TLS tests do): the server's PEM file and a
// pool trusting the CA.
func benchCertificates(dir string) (file string, pool *x509.CertPool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(pkiFailure)
			if !ok {
				panic(p)
			}
			err = errors.New(string(f))
		}
	}()
	var t pkiT
	ca := testpki.NewCA(t, dir, "bench-ca")
	file = ca.IssueNow(t, dir, "server", true)
	pool = x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return file, pool, nil
}

// pkiT is the testpki.TB of a program: Fatal panics with a pkiFailure that
// benchCertificates turns back into an error.
type pkiT struct{}

type pkiFailure string

func (pkiT) Helper()           {}
func (pkiT) Fatal(args ...any) { panic(pkiFailure(fmt.Sprint(args...))) }
