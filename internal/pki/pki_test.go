package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

func TestEnsureGeneratesAndReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	b, err := Ensure(dir, []string{"skiff.example", "10.1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{CAKey, ServerKey, AdminKey} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", name, st.Mode().Perm())
		}
	}
	leaf, err := x509.ParseCertificate(b.Server.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("server key algorithm %v, want ECDSA", leaf.PublicKeyAlgorithm)
	}
	for _, host := range []string{"localhost", "127.0.0.1", "::1", "skiff.example", "10.1.2.3"} {
		if err := leaf.VerifyHostname(host); err != nil {
			t.Errorf("serving cert does not cover %s: %v", host, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: b.CertPool()}); err != nil {
		t.Errorf("serving cert not signed by the CA: %v", err)
	}
	blk, _ := pem.Decode(b.AdminCertPEM)
	admin, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if admin.Subject.CommonName != "admin" || len(admin.Subject.Organization) != 1 || admin.Subject.Organization[0] != "system:masters" {
		t.Errorf("admin subject %v, want CN=admin O=system:masters", admin.Subject)
	}

	again, err := Ensure(dir, []string{"skiff.example", "10.1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.CAPEM, b.CAPEM) || !bytes.Equal(again.Server.Certificate[0], b.Server.Certificate[0]) || !bytes.Equal(again.AdminCertPEM, b.AdminCertPEM) {
		t.Error("a second start generated new certificates instead of reusing them")
	}

	// A new SAN reissues the serving certificate under the same CA.
	third, err := Ensure(dir, []string{"other.example"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(third.CAPEM, b.CAPEM) {
		t.Error("the CA changed")
	}
	leaf3, _ := x509.ParseCertificate(third.Server.Certificate[0])
	if err := leaf3.VerifyHostname("other.example"); err != nil {
		t.Errorf("new SAN not covered: %v", err)
	}
}

func TestHalfCAIsRefused(t *testing.T) {
	dir := t.TempDir()
	if _, err := Ensure(dir, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, CAKey)); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(dir, nil); err == nil {
		t.Fatal("a CA certificate without its key was accepted")
	}
}

// TestMutualTLS serves HTTPS with the bundle and connects with the admin client certificate.
func TestMutualTLS(t *testing.T) {
	b, err := Ensure(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", b.ServerTLS())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "no client cert", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(r.TLS.PeerCertificates[0].Subject.CommonName))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	pair, err := tls.X509KeyPair(b.AdminCertPEM, b.AdminKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: b.CertPool(), Certificates: []tls.Certificate{pair}}}}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	resp, err := c.Get("https://localhost:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode != 200 || buf.String() != "admin" {
		t.Fatalf("got %d %q, want 200 admin", resp.StatusCode, buf.String())
	}
	// Without trusting the CA the handshake fails.
	plain := &http.Client{Transport: &http.Transport{}}
	if _, err := plain.Get("https://localhost:" + port + "/"); err == nil {
		t.Fatal("a client without the CA trusted the server")
	}
}

// Load serves from a directory made elsewhere without the CA key and without writing to it;
// a serving certificate from another CA is refused.
func TestLoadReadsWithoutWriting(t *testing.T) {
	dir := t.TempDir()
	made, err := Ensure(dir, []string{"apiserver1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, CAKey)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	b, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Server.Certificate[0], made.Server.Certificate[0]) || !bytes.Equal(b.AdminKeyPEM, made.AdminKeyPEM) {
		t.Error("Load did not return the certificates Ensure made")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 5 {
		t.Errorf("Load changed the directory: %d entries, want the 5 left", len(entries))
	}

	other, err := Ensure(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	foreign := t.TempDir()
	for name, src := range map[string]string{CACert: filepath.Join(dir, CACert), ServerCert: filepath.Join(other.Dir, ServerCert), ServerKey: filepath.Join(other.Dir, ServerKey)} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(foreign, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Load(foreign); err == nil {
		t.Error("a serving certificate signed by another CA was loaded")
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("an empty directory was loaded")
	}
}
