package compat

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mayflydb/mayfly/internal/testpki"
	"github.com/mayflydb/mayfly/server"
)

type tlsCA = testpki.CA

// tlsPKI is what the TLS tests share: a CA with a server and a client
// certificate, and a second, unrelated CA with its own client certificate.
type tlsPKI struct {
	dir                   string
	ca, otherCA           *tlsCA
	serverPEM, clientPEM  string
	otherClientPEM        string
	otherServerPEM        string // the server certificate signed by otherCA
	expiredPEM, futurePEM string
}

func newTLSPKI(t *testing.T) *tlsPKI {
	t.Helper()
	dir := t.TempDir()
	p := &tlsPKI{dir: dir}
	p.ca = testpki.NewCA(t, dir, "ca")
	p.otherCA = testpki.NewCA(t, dir, "other-ca")
	from, to := time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	p.serverPEM = p.ca.Issue(t, dir, "server", true, from, to)
	p.clientPEM = p.ca.Issue(t, dir, "client", false, from, to)
	p.otherClientPEM = p.otherCA.Issue(t, dir, "other-client", false, from, to)
	p.otherServerPEM = p.otherCA.Issue(t, dir, "other-server", true, from, to)
	p.expiredPEM = p.ca.Issue(t, dir, "expired", true, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	p.futurePEM = p.ca.Issue(t, dir, "future", true, time.Now().Add(24*time.Hour), time.Now().Add(48*time.Hour))
	return p
}

func startTLSServer(t *testing.T, opts server.TLSOptions) *server.Server {
	t.Helper()
	s, err := server.Start(server.Config{Bind: "127.0.0.1", Port: 0, InMemory: true, TLS: opts})
	if err != nil {
		t.Fatalf("start with %+v: %v", opts, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tlsURI is a connection string to s; query is added as it is
// (tls=true&tlsCAFile=… and so on), with file paths escaped.
func tlsURI(s *server.Server, params ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	u := "mongodb://" + s.Addr() + "/?serverSelectionTimeoutMS=2000&connectTimeoutMS=2000"
	if len(q) > 0 {
		u += "&" + q.Encode()
	}
	return u
}

// tlsRoundTrip connects with uri and runs hello, an insert and a find; it
// returns the first error.
func tlsRoundTrip(t *testing.T, uri string) error {
	t.Helper()
	return tlsRoundTripOpts(t, options.Client().ApplyURI(uri))
}

func tlsRoundTripOpts(t *testing.T, opts *options.ClientOptions) error {
	t.Helper()
	cli, err := mongo.Connect(opts)
	if err != nil {
		return err
	}
	defer cli.Disconnect(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cli.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Err(); err != nil {
		return err
	}
	coll := cli.Database("tls_db").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: "secret"}}); err != nil {
		var we mongo.WriteException
		if !errors.As(err, &we) || !we.HasErrorCode(11000) { // the same server, a second client
			return err
		}
	}
	var got bson.M
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&got); err != nil {
		return err
	}
	if got["x"] != "secret" {
		t.Fatalf("find over TLS returned %v", got)
	}
	return nil
}

// presenting is client options for s that trust ca and always present the
// certificate in pemFile: the Go TLS client otherwise leaves out a
// certificate whose issuer the server did not list as acceptable, and the
// server's own check would go untested.
func presenting(t *testing.T, s *server.Server, ca *tlsCA, pemFile string) *options.ClientOptions {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if pemFile != "" {
		cert, err := tls.LoadX509KeyPair(pemFile, pemFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return options.Client().ApplyURI(tlsURI(s)).SetTLSConfig(cfg)
}

func mustConnectOpts(t *testing.T, what string, opts *options.ClientOptions) {
	t.Helper()
	if err := tlsRoundTripOpts(t, opts); err != nil {
		t.Fatalf("%s: want a working connection, got %v", what, err)
	}
}

func mustFailOpts(t *testing.T, what string, opts *options.ClientOptions) {
	t.Helper()
	if err := tlsRoundTripOpts(t, opts); err == nil {
		t.Fatalf("%s: want the connection refused, but commands ran", what)
	} else {
		t.Logf("%s: refused as expected: %v", what, firstLine(err.Error()))
	}
}

func mustConnect(t *testing.T, what, uri string) {
	t.Helper()
	if err := tlsRoundTrip(t, uri); err != nil {
		t.Fatalf("%s: want a working connection, got %v", what, err)
	}
}

func mustFail(t *testing.T, what, uri string) {
	t.Helper()
	if err := tlsRoundTrip(t, uri); err == nil {
		t.Fatalf("%s: want the connection refused, but commands ran", what)
	} else {
		t.Logf("%s: refused as expected: %v", what, firstLine(err.Error()))
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func TestIssue15TLSRequireTLS(t *testing.T) {
	p := newTLSPKI(t)
	s := startTLSServer(t, server.TLSOptions{Mode: "requireTLS", CertificateKeyFile: p.serverPEM})

	mustConnect(t, "tls=true with the right CA", tlsURI(s, "tls", "true", "tlsCAFile", p.ca.File))
	// The server's certificate names localhost too.
	mustConnect(t, "tls=true by host name", strings.Replace(tlsURI(s, "tls", "true", "tlsCAFile", p.ca.File), "127.0.0.1", "localhost", 1))
	mustFail(t, "plain client under requireTLS", tlsURI(s))
	mustFail(t, "client trusting another CA", tlsURI(s, "tls", "true", "tlsCAFile", p.otherCA.File))
	// Without a CA file the server asks for no client certificate: one
	// offered anyway is not in the way.
	mustConnect(t, "client certificate not asked for", tlsURI(s, "tls", "true", "tlsCAFile", p.ca.File, "tlsCertificateKeyFile", p.otherClientPEM))

	// A plain request on a raw socket gets no reply: the connection is
	// closed, as mongod does ("The server is configured to only allow SSL
	// connections").
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write(plainPing(t)); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	if n, err := nc.Read(buf); err == nil || n > 0 {
		t.Fatalf("plain ping under requireTLS: read %d bytes, err %v; want the connection closed", n, err)
	}

	// getCmdLineOpts shows net.tls as mongod's does.
	cli, err := mongo.Connect(options.Client().ApplyURI(tlsURI(s, "tls", "true", "tlsCAFile", p.ca.File)))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Disconnect(context.Background())
	opts, err := cli.Database("admin").RunCommand(context.Background(), bson.D{{Key: "getCmdLineOpts", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	mode, _ := opts.Lookup("parsed", "net", "tls", "mode").StringValueOK()
	keyFile, _ := opts.Lookup("parsed", "net", "tls", "certificateKeyFile").StringValueOK()
	if mode != "requireTLS" || keyFile != p.serverPEM {
		t.Errorf("getCmdLineOpts parsed = %v", opts.Lookup("parsed"))
	}
}

// plainPing is an OP_MSG {ping: 1, $db: "admin"}.
func plainPing(t *testing.T) []byte {
	body, err := bson.Marshal(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	if err != nil {
		t.Fatal(err)
	}
	n := 16 + 4 + 1 + len(body)
	msg := make([]byte, 0, n)
	le := func(v uint32) { msg = append(msg, byte(v), byte(v>>8), byte(v>>16), byte(v>>24)) }
	le(uint32(n))
	le(7)    // requestID
	le(0)    // responseTo
	le(2013) // OP_MSG
	le(0)    // flags
	msg = append(msg, 0)
	return append(msg, body...)
}

func TestIssue15TLSAllowAndPreferTakeBoth(t *testing.T) {
	p := newTLSPKI(t)
	for _, mode := range []string{"allowTLS", "preferTLS"} {
		s := startTLSServer(t, server.TLSOptions{Mode: mode, CertificateKeyFile: p.serverPEM})
		mustConnect(t, mode+": TLS client", tlsURI(s, "tls", "true", "tlsCAFile", p.ca.File))
		mustConnect(t, mode+": plain client", tlsURI(s))
		mustFail(t, mode+": TLS client trusting another CA", tlsURI(s, "tls", "true", "tlsCAFile", p.otherCA.File))

		// A plain message whose first byte is 0x16 (a TLS handshake
		// record's) is still plain: the decision is mongod's, on the
		// header's responseTo, not on the first byte.
		nc, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		msg := paddedPing(t, 0x116)
		if msg[0] != 0x16 {
			t.Fatalf("padded ping starts with %#x", msg[0])
		}
		if _, err := nc.Write(msg); err != nil {
			t.Fatal(err)
		}
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		hdr := make([]byte, 16)
		if _, err := readFull(nc, hdr); err != nil {
			t.Fatalf("%s: plain ping of 0x116 bytes got no reply: %v", mode, err)
		}
		if rt := int32(hdr[8]) | int32(hdr[9])<<8 | int32(hdr[10])<<16 | int32(hdr[11])<<24; rt != 7 {
			t.Errorf("%s: reply responseTo %d, want 7", mode, rt)
		}
		nc.Close()
	}
}

func readFull(nc net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := nc.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// paddedPing is plainPing padded (with a comment string) to exactly size
// bytes.
func paddedPing(t *testing.T, size int) []byte {
	base := len(plainPing(t))
	// "comment": string adds 1 + 8 (key) + 4 (len) + len + 1 (NUL).
	pad := size - base - (1 + 8 + 4 + 1)
	body, err := bson.Marshal(bson.D{{Key: "ping", Value: 1}, {Key: "comment", Value: strings.Repeat("x", pad)}, {Key: "$db", Value: "admin"}})
	if err != nil {
		t.Fatal(err)
	}
	n := 16 + 4 + 1 + len(body)
	if n != size {
		t.Fatalf("padded ping is %d bytes, want %d", n, size)
	}
	msg := make([]byte, 0, n)
	le := func(v uint32) { msg = append(msg, byte(v), byte(v>>8), byte(v>>16), byte(v>>24)) }
	le(uint32(n))
	le(7)
	le(0)
	le(2013)
	le(0)
	msg = append(msg, 0)
	return append(msg, body...)
}

func TestIssue15TLSClientCertificates(t *testing.T) {
	p := newTLSPKI(t)
	trust := []string{"tls", "true", "tlsCAFile", p.ca.File}
	with := func(pemFile string) []string {
		return append(append([]string{}, trust...), "tlsCertificateKeyFile", pemFile)
	}

	// With --tlsCAFile a client must present a certificate signed by it.
	s := startTLSServer(t, server.TLSOptions{Mode: "requireTLS", CertificateKeyFile: p.serverPEM, CAFile: p.ca.File})
	mustConnect(t, "client certificate signed by the CA (URI)", tlsURI(s, with(p.clientPEM)...))
	mustConnectOpts(t, "client certificate signed by the CA", presenting(t, s, p.ca, p.clientPEM))
	mustFailOpts(t, "client certificate signed by another CA", presenting(t, s, p.ca, p.otherClientPEM))
	mustFail(t, "client certificate signed by another CA (URI)", tlsURI(s, with(p.otherClientPEM)...))
	mustFail(t, "no client certificate", tlsURI(s, trust...))
	mustFail(t, "plain client", tlsURI(s))

	// --tlsAllowConnectionsWithoutCertificates: none is fine, a bad one
	// is still refused.
	s = startTLSServer(t, server.TLSOptions{Mode: "requireTLS", CertificateKeyFile: p.serverPEM, CAFile: p.ca.File, AllowConnectionsWithoutCertificates: true})
	mustConnect(t, "no client certificate, allowed", tlsURI(s, trust...))
	mustConnectOpts(t, "good client certificate, allowed", presenting(t, s, p.ca, p.clientPEM))
	mustFailOpts(t, "bad client certificate, connections without allowed", presenting(t, s, p.ca, p.otherClientPEM))

	// --tlsAllowInvalidCertificates: a certificate from another CA passes;
	// one is still required (mongod's parseAndValidatePeerCertificate).
	s = startTLSServer(t, server.TLSOptions{Mode: "requireTLS", CertificateKeyFile: p.serverPEM, CAFile: p.ca.File, AllowInvalidCertificates: true})
	mustConnectOpts(t, "invalid client certificate, allowed", presenting(t, s, p.ca, p.otherClientPEM))
	mustConnectOpts(t, "valid client certificate, invalid allowed", presenting(t, s, p.ca, p.clientPEM))
	mustFailOpts(t, "no client certificate, invalid allowed", presenting(t, s, p.ca, ""))

	// preferTLS with a CA: plain clients still come in, TLS ones need a
	// certificate.
	s = startTLSServer(t, server.TLSOptions{Mode: "preferTLS", CertificateKeyFile: p.serverPEM, CAFile: p.ca.File})
	mustConnect(t, "preferTLS: plain client", tlsURI(s))
	mustConnectOpts(t, "preferTLS: client certificate", presenting(t, s, p.ca, p.clientPEM))
	mustFailOpts(t, "preferTLS: client certificate of another CA", presenting(t, s, p.ca, p.otherClientPEM))
}

func TestIssue15TLSStartupErrors(t *testing.T) {
	p := newTLSPKI(t)
	cases := []struct {
		opts server.TLSOptions
		want string
		bad  bool // errors.Is ErrBadTLSOptions
	}{
		{server.TLSOptions{Mode: "requireTLS"}, "need tlsCertificateKeyFile or certificateSelector when TLS is enabled", true},
		{server.TLSOptions{Mode: "preferTLS", CAFile: p.ca.File}, "need tlsCertificateKeyFile or certificateSelector when TLS is enabled", true},
		{server.TLSOptions{Mode: "requireSSL", CertificateKeyFile: p.serverPEM}, "unsupported value for tlsMode requireSSL", true},
		{server.TLSOptions{CertificateKeyFile: p.serverPEM}, "need to enable TLS via the sslMode/tlsMode flag when using TLS configuration parameters", true},
		{server.TLSOptions{Mode: "disabled", CAFile: p.ca.File}, "need to enable TLS via the sslMode/tlsMode flag when using TLS configuration parameters", true},
		{server.TLSOptions{Mode: "requireTLS", CertificateKeyFile: filepath.Join(p.dir, "missing.pem")}, "cannot read the TLS certificate key file", false},
		{server.TLSOptions{Mode: "requireTLS", CertificateKeyFile: p.ca.File}, "cannot use the TLS certificate key file", false}, // no key in it
		{server.TLSOptions{Mode: "requireTLS", CertificateKeyFile: p.expiredPEM}, "The provided SSL certificate is expired or not yet valid", false},
		{server.TLSOptions{Mode: "requireTLS", CertificateKeyFile: p.futurePEM}, "The provided SSL certificate is expired or not yet valid", false},
		{server.TLSOptions{Mode: "requireTLS", CertificateKeyFile: p.serverPEM, CAFile: p.serverPEM + ".nope"}, "cannot read the TLS CA file", false},
	}
	for _, c := range cases {
		s, err := server.Start(server.Config{Bind: "127.0.0.1", Port: 0, InMemory: true, TLS: c.opts})
		if err == nil {
			s.Close()
			t.Errorf("%+v: started; want %q", c.opts, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %q, want %q", c.opts, err, c.want)
		}
		if errors.Is(err, server.ErrBadTLSOptions) != c.bad {
			t.Errorf("%+v: errors.Is(ErrBadTLSOptions) = %v", c.opts, !c.bad)
		}
	}
	// A server certificate from a CA the client does not trust fails the
	// client's verification.
	s := startTLSServer(t, server.TLSOptions{Mode: "requireTLS", CertificateKeyFile: p.otherServerPEM})
	mustFail(t, "server certificate from an untrusted CA", tlsURI(s, "tls", "true", "tlsCAFile", p.ca.File))
	mustConnect(t, "same server, client trusting its CA", tlsURI(s, "tls", "true", "tlsCAFile", p.otherCA.File))
}

// TestIssue15TLSShutdown: Close does not wait on TLS clients that are idle
// or that connected and never finished (or began) their handshake.
func TestIssue15TLSShutdown(t *testing.T) {
	p := newTLSPKI(t)
	s, err := server.Start(server.Config{Bind: "127.0.0.1", Port: 0, InMemory: true, ShutdownTimeout: 10 * time.Second,
		TLS: server.TLSOptions{Mode: "preferTLS", CertificateKeyFile: p.serverPEM}})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := mongo.Connect(options.Client().ApplyURI(tlsURI(s, "tls", "true", "tlsCAFile", p.ca.File)))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Disconnect(context.Background())
	if err := cli.Database("admin").RunCommand(context.Background(), bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatal(err)
	}
	silent, err := net.Dial("tcp", s.Addr()) // sends nothing
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	halfway, err := net.Dial("tcp", s.Addr()) // a TLS record header, then nothing
	if err != nil {
		t.Fatal(err)
	}
	defer halfway.Close()
	if _, err := halfway.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close took %v with idle TLS clients", d)
	}
}
