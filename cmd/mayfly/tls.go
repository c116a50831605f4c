package main

import (
	"flag"

	"github.com/mayflydb/mayfly/server"
)

// tlsFlags declares mongod's TLS options on fs; the returned options are
// filled in by fs.Parse.
func tlsFlags(fs *flag.FlagSet) *server.TLSOptions {
	o := &server.TLSOptions{}
	fs.StringVar(&o.Mode, "tlsMode", "disabled", "TLS mode: disabled|allowTLS|preferTLS|requireTLS (allowTLS and preferTLS accept TLS and plain clients on the same port)")
	fs.StringVar(&o.CertificateKeyFile, "tlsCertificateKeyFile", "", "PEM file with the server's certificate and private key (required unless --tlsMode disabled)")
	fs.StringVar(&o.CAFile, "tlsCAFile", "", "PEM file of the CAs that client certificates must chain to; when given, clients must present a valid certificate")
	fs.BoolVar(&o.AllowConnectionsWithoutCertificates, "tlsAllowConnectionsWithoutCertificates", false, "with --tlsCAFile, accept clients that present no certificate")
	fs.BoolVar(&o.AllowInvalidCertificates, "tlsAllowInvalidCertificates", false, "accept client certificates that do not verify (for tests)")
	return o
}
