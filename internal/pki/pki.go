// Package pki makes and keeps the certificates of a Skiff control plane, like k3s does on first
// start: a CA, a serving certificate for the apiserver, and a client certificate for the admin.
// Everything is ECDSA P-256 and lives in one directory (keys 0600); a second start reuses it.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// File names inside the directory.
const (
	CACert     = "ca.crt"
	CAKey      = "ca.key"
	ServerCert = "server.crt"
	ServerKey  = "server.key"
	AdminCert  = "admin.crt"
	AdminKey   = "admin.key"
)

// Validity of what is generated: the CA outlives the leaves so they can be renewed under it.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
)

// Bundle is a loaded PKI directory.
type Bundle struct {
	Dir    string
	CA     *x509.Certificate
	CAPEM  []byte
	caKey  *ecdsa.PrivateKey
	Server tls.Certificate
	// Admin client certificate and key, PEM (for a kubeconfig).
	AdminCertPEM, AdminKeyPEM []byte
}

// Ensure loads the PKI in dir, generating what is missing. The serving certificate is
// regenerated when it lacks one of sans (hostnames or IPs) or is close to expiry; the CA is
// never replaced, so clients keep trusting the server.
func Ensure(dir string, sans []string) (*Bundle, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	b := &Bundle{Dir: dir}
	if err := b.ensureCA(); err != nil {
		return nil, err
	}
	want := DefaultSANs(sans)
	if err := b.ensureLeaf(ServerCert, ServerKey, func(c *x509.Certificate) bool { return coversSANs(c, want) }, func() *x509.Certificate {
		return serverTemplate(want)
	}); err != nil {
		return nil, err
	}
	if err := b.ensureLeaf(AdminCert, AdminKey, func(*x509.Certificate) bool { return true }, func() *x509.Certificate {
		return ClientTemplate("admin", "system:masters")
	}); err != nil {
		return nil, err
	}
	loaded, err := Load(dir)
	if err != nil {
		return nil, err
	}
	loaded.caKey = b.caKey // what Load leaves out: this directory holds the CA key
	return loaded, nil
}

// Load reads a PKI directory made elsewhere (`skiff cluster-creds`, shared by every apiserver
// replica) and writes nothing to it, so it can be mounted read-only: the CA certificate and the
// serving pair, which must chain to it, are required; the CA key is not needed to serve and may
// be left out; the admin pair is read when present (for the kubeconfig).
func Load(dir string) (*Bundle, error) {
	b := &Bundle{Dir: dir}
	var err error
	if b.CAPEM, err = os.ReadFile(b.path(CACert)); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	block, _ := pem.Decode(b.CAPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("pki: %s: no CERTIFICATE block", b.path(CACert))
	}
	if b.CA, err = x509.ParseCertificate(block.Bytes); err != nil {
		return nil, fmt.Errorf("pki: %s: %w", b.path(CACert), err)
	}
	certPEM, err := os.ReadFile(b.path(ServerCert))
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	keyPEM, err := os.ReadFile(b.path(ServerKey))
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	cert, _, err := parsePair(certPEM, keyPEM)
	if err == nil {
		err = cert.CheckSignatureFrom(b.CA)
	}
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", b.path(ServerCert), err)
	}
	if b.Server, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("pki: %s: %w", b.path(ServerCert), err)
	}
	adminCert, err1 := os.ReadFile(b.path(AdminCert))
	adminKey, err2 := os.ReadFile(b.path(AdminKey))
	if err1 == nil && err2 == nil {
		b.AdminCertPEM, b.AdminKeyPEM = adminCert, adminKey
	}
	return b, nil
}

// DefaultSANs are the names the serving certificate always covers, plus extra.
func DefaultSANs(extra []string) []string {
	out := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil && h != "" {
		out = append(out, h)
	}
	for _, s := range extra {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func (b *Bundle) path(name string) string { return filepath.Join(b.Dir, name) }

// CertPool is a pool holding only the CA.
func (b *Bundle) CertPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(b.CA)
	return p
}

// ServerTLS is the apiserver's TLS config: the serving certificate, and client certificates
// requested (not required: bearer tokens are the other way in) and verified against the CA.
func (b *Bundle) ServerTLS() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{b.Server},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    b.CertPool(),
		MinVersion:   tls.VersionTLS12,
	}
}

func (b *Bundle) ensureCA() error {
	certPEM, err1 := os.ReadFile(b.path(CACert))
	keyPEM, err2 := os.ReadFile(b.path(CAKey))
	switch {
	case err1 == nil && err2 == nil:
		cert, key, err := parsePair(certPEM, keyPEM)
		if err != nil {
			return fmt.Errorf("pki: %s: %w", b.path(CACert), err)
		}
		b.CA, b.caKey, b.CAPEM = cert, key, certPEM
		return nil
	case errors.Is(err1, os.ErrNotExist) && errors.Is(err2, os.ErrNotExist):
	default:
		// Half a CA cannot be repaired without invalidating every issued certificate.
		return fmt.Errorf("pki: %s and %s must both exist or both be absent", b.path(CACert), b.path(CAKey))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "skiff-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	if b.CA, err = x509.ParseCertificate(der); err != nil {
		return err
	}
	b.caKey = key
	b.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return writePair(b.path(CACert), b.path(CAKey), b.CAPEM, key)
}

// ensureLeaf keeps the pair at certName/keyName if it was issued by our CA, is valid for a while
// yet and ok accepts it; otherwise it issues a new one from tmpl.
func (b *Bundle) ensureLeaf(certName, keyName string, ok func(*x509.Certificate) bool, tmpl func() *x509.Certificate) error {
	certPEM, err1 := os.ReadFile(b.path(certName))
	keyPEM, err2 := os.ReadFile(b.path(keyName))
	if err1 == nil && err2 == nil {
		if cert, _, err := parsePair(certPEM, keyPEM); err == nil && cert.CheckSignatureFrom(b.CA) == nil &&
			time.Until(cert.NotAfter) > 30*24*time.Hour && ok(cert) {
			return nil
		}
	}
	certPEM, key, err := b.Issue(tmpl())
	if err != nil {
		return err
	}
	return writePair(b.path(certName), b.path(keyName), certPEM, key)
}

// Issue signs tmpl with the CA under a fresh P-256 key.
func (b *Bundle) Issue(tmpl *x509.Certificate) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, b.CA, &key.PublicKey, b.caKey)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key, nil
}

// ClientTemplate is a client certificate for user (CN) in groups (O), as Kubernetes reads them.
func ClientTemplate(user string, groups ...string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: user, Organization: groups},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

func serverTemplate(sans []string) *x509.Certificate {
	t := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "skiff-apiserver"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, s := range sans {
		if ip := net.ParseIP(s); ip != nil {
			t.IPAddresses = append(t.IPAddresses, ip)
		} else {
			t.DNSNames = append(t.DNSNames, s)
		}
	}
	return t
}

func coversSANs(c *x509.Certificate, sans []string) bool {
	for _, s := range sans {
		if ip := net.ParseIP(s); ip != nil {
			if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
				return false
			}
		} else if !slices.Contains(c.DNSNames, s) {
			return false
		}
	}
	return true
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, nil, errors.New("no CERTIFICATE block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, nil, errors.New("no key block")
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, nil, errors.New("the key does not match the certificate")
	}
	return cert, key, nil
}

// writePair writes the certificate 0644 and the key 0600, each atomically.
func writePair(certPath, keyPath string, certPEM []byte, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return WriteFileAtomic(certPath, certPEM, 0o644)
}

// WriteFileAtomic writes data to a temporary file and renames it over path, so a crash never
// leaves a half-written secret.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
