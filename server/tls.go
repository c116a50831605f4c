package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mayflydb/mayfly/wire"
)

// TLSOptions are mongod's net.tls settings that mayfly supports.
type TLSOptions struct {
	// Mode is --tlsMode: disabled (or empty), allowTLS, preferTLS or
	// requireTLS. allowTLS and preferTLS take TLS and plain clients on the
	// same port; requireTLS closes plain ones.
	Mode string
	// CertificateKeyFile is --tlsCertificateKeyFile: one PEM file holding
	// the server's certificate (and chain) and its private key.
	CertificateKeyFile string
	// CAFile is --tlsCAFile: the CAs that client certificates must chain
	// to. With it, clients must present a valid certificate (unless
	// AllowConnectionsWithoutCertificates); without it no client
	// certificate is asked for.
	CAFile string
	// AllowConnectionsWithoutCertificates is
	// --tlsAllowConnectionsWithoutCertificates: with CAFile, a client that
	// presents no certificate is still accepted (one that presents an
	// invalid certificate is not).
	AllowConnectionsWithoutCertificates bool
	// AllowInvalidCertificates is --tlsAllowInvalidCertificates: client
	// certificates that do not verify are accepted (for tests).
	AllowInvalidCertificates bool
}

// ErrBadTLSOptions matches (errors.Is) the errors of an inconsistent TLS
// configuration: mongod refuses to start on them with BadValue.
var ErrBadTLSOptions = errors.New("bad TLS options")

type tlsOptionsError struct{ msg string }

func (e *tlsOptionsError) Error() string        { return e.msg }
func (e *tlsOptionsError) Is(target error) bool { return target == ErrBadTLSOptions }

// Validate checks the options as mongod's storeSSLServerOptions does,
// without reading any file.
func (o TLSOptions) Validate() error {
	mode, ok := wire.ParseTLSMode(o.Mode)
	if !ok {
		return &tlsOptionsError{"unsupported value for tlsMode " + o.Mode}
	}
	if mode != wire.TLSDisabled {
		if o.CertificateKeyFile == "" {
			return &tlsOptionsError{"need tlsCertificateKeyFile or certificateSelector when TLS is enabled"}
		}
		return nil
	}
	if o.CertificateKeyFile != "" || o.CAFile != "" || o.AllowConnectionsWithoutCertificates {
		return &tlsOptionsError{"need to enable TLS via the sslMode/tlsMode flag when using TLS configuration parameters"}
	}
	return nil
}

// load validates the options and reads the files: the tls.Config to serve
// with (nil when TLS is disabled) and the mode.
func (o TLSOptions) load(now time.Time) (*tls.Config, wire.TLSMode, error) {
	if err := o.Validate(); err != nil {
		return nil, wire.TLSDisabled, err
	}
	mode, _ := wire.ParseTLSMode(o.Mode)
	if mode == wire.TLSDisabled {
		return nil, mode, nil
	}
	pem, err := os.ReadFile(o.CertificateKeyFile)
	if err != nil {
		return nil, mode, fmt.Errorf("cannot read the TLS certificate key file: %w", err)
	}
	// The one file holds both: X509KeyPair picks the CERTIFICATE blocks for
	// the chain and the PRIVATE KEY block for the key.
	cert, err := tls.X509KeyPair(pem, pem)
	if err != nil {
		return nil, mode, fmt.Errorf("cannot use the TLS certificate key file %s: %w", o.CertificateKeyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, mode, fmt.Errorf("cannot parse the certificate in %s: %w", o.CertificateKeyFile, err)
		}
	}
	if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return nil, mode, fmt.Errorf("The provided SSL certificate is expired or not yet valid (%s: valid from %s to %s)", //nolint:staticcheck // mongod's message
			o.CertificateKeyFile, leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		// mongod disables TLS 1.0 by default (and 1.1 cannot be asked for
		// by a modern driver anyway).
		MinVersion: tls.VersionTLS12,
		ClientAuth: tls.NoClientCert,
	}
	if o.CAFile != "" {
		caPEM, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, mode, fmt.Errorf("cannot read the TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, mode, fmt.Errorf("no certificate found in the TLS CA file %s", o.CAFile)
		}
		cfg.ClientCAs = pool
		// As mongod's parseAndValidatePeerCertificate: with a CA, a client
		// without a certificate is refused unless
		// allowConnectionsWithoutCertificates; an invalid one is refused
		// unless allowInvalidCertificates.
		switch {
		case o.AllowInvalidCertificates && o.AllowConnectionsWithoutCertificates:
			cfg.ClientAuth = tls.RequestClientCert
		case o.AllowInvalidCertificates:
			cfg.ClientAuth = tls.RequireAnyClientCert
		case o.AllowConnectionsWithoutCertificates:
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		default:
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return cfg, mode, nil
}

// AddParsed adds the options to a getCmdLineOpts "parsed" map, with
// mongod's names (net.tls.mode, net.tls.certificateKeyFile, …).
func (o TLSOptions) AddParsed(m map[string]any) {
	if o.Mode != "" && o.Mode != "disabled" {
		m["net.tls.mode"] = o.Mode
	}
	if o.CertificateKeyFile != "" {
		m["net.tls.certificateKeyFile"] = o.CertificateKeyFile
	}
	if o.CAFile != "" {
		m["net.tls.CAFile"] = o.CAFile
	}
	if o.AllowConnectionsWithoutCertificates {
		m["net.tls.allowConnectionsWithoutCertificates"] = true
	}
	if o.AllowInvalidCertificates {
		m["net.tls.allowInvalidCertificates"] = true
	}
}
