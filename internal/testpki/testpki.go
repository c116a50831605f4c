// Package testpki makes certificate authorities and certificates at run
// time for the TLS tests (compat, server, cmd/mayfly): nothing is checked
// in, nothing outlives the test's temporary directory.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// TB is the part of testing.TB the helpers use.
type TB interface {
	Helper()
	Fatal(args ...any)
}

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// File is the CA certificate, PEM: what --tlsCAFile and the drivers'
	// tlsCAFile take.
	File string
}

var serial atomic.Int64

// NewCA writes <dir>/<name>.pem, a self-signed CA valid for a day.
func NewCA(t TB, dir, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"mayfly tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, name+".pem")
	write(t, file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return &CA{Cert: cert, Key: key, File: file}
}

// Issue writes <dir>/<name>.pem holding a certificate signed by the CA and
// its private key, as --tlsCertificateKeyFile and the drivers'
// tlsCertificateKeyFile take them. A server certificate names localhost
// and 127.0.0.1; a client one is for client authentication.
func (ca *CA) Issue(t TB, dir, name string, server bool, notBefore, notAfter time.Time) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"mayfly tests"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	out = append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})...)
	file := filepath.Join(dir, name+".pem")
	write(t, file, out)
	return file
}

// IssueNow is Issue valid from an hour ago for a day.
func (ca *CA) IssueNow(t TB, dir, name string, server bool) string {
	t.Helper()
	return ca.Issue(t, dir, name, server, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
}

func write(t TB, file string, b []byte) {
	t.Helper()
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
