package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mayflydb/mayfly/internal/testpki"
)

// TestIssue15TLSFlags: TLS options are checked before anything starts, with
// mongod's messages and its exit code for bad options; with a certificate
// the binary serves TLS clients and refuses plain ones under requireTLS.
func TestIssue15TLSFlags(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "ca")
	serverPEM := ca.IssueNow(t, dir, "server", true)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tlsMode", "requireTLS"}, "need tlsCertificateKeyFile or certificateSelector when TLS is enabled"},
		{[]string{"--tlsMode", "preferTLS", "--tlsCAFile", ca.File}, "need tlsCertificateKeyFile or certificateSelector when TLS is enabled"},
		{[]string{"--tlsMode", "sometimes", "--tlsCertificateKeyFile", serverPEM}, "unsupported value for tlsMode sometimes"},
		{[]string{"--tlsCertificateKeyFile", serverPEM}, "need to enable TLS via the sslMode/tlsMode flag when using TLS configuration parameters"},
	} {
		code, out, errOut := runOnce(t, append([]string{"--port", "0", "--dbpath", t.TempDir()}, c.args...)...)
		if code != exitBadOptions || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d with %q", c.args, code, out, errOut, exitBadOptions, c.want)
		}
	}
	// A certificate file that is not there fails startup, non-zero.
	code, _, errOut := runOnce(t, "--port", "0", "--dbpath", t.TempDir(), "--tlsMode", "requireTLS", "--tlsCertificateKeyFile", dir+"/missing.pem")
	if code == 0 || !strings.Contains(errOut, "cannot read the TLS certificate key file") {
		t.Errorf("missing certificate file: exit %d, stderr %q", code, errOut)
	}

	p := launch(t, "--dbpath", t.TempDir(), "--tlsMode", "requireTLS", "--tlsCertificateKeyFile", serverPEM)
	ping := func(uri string) error {
		cli, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(2 * time.Second))
		if err != nil {
			return err
		}
		defer cli.Disconnect(context.Background())
		return cli.Database("admin").RunCommand(context.Background(), bson.D{{Key: "ping", Value: 1}}).Err()
	}
	if err := ping("mongodb://" + p.addr + "/?tls=true&tlsCAFile=" + ca.File); err != nil {
		t.Errorf("TLS client: %v", err)
	}
	if err := ping("mongodb://" + p.addr + "/"); err == nil {
		t.Error("plain client under requireTLS: ping worked")
	}
}
