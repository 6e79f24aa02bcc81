package authn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/internal/pki"
)

func TestParseTokens(t *testing.T) {
	tk, err := ParseTokens(strings.NewReader("# comment\nsecret1,alice,u1,\"dev,ops\"\nsecret2,system:node:a,u2,system:nodes\nsecret3,bob,u3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tk.Len() != 3 {
		t.Fatalf("%d tokens, want 3", tk.Len())
	}
	u, ok := tk.Lookup(context.Background(), "secret1")
	if !ok || u.Name != "alice" || !u.InGroup("dev") || !u.InGroup("ops") || !u.InGroup(GroupAuthenticated) {
		t.Errorf("secret1 = %+v %v", u, ok)
	}
	if u, _ := tk.Lookup(context.Background(), "secret2"); u.NodeName() != "a" {
		t.Errorf("secret2 node = %q, want a", u.NodeName())
	}
	for _, bad := range []string{"", "secret", "secret1 ", "SECRET1"} {
		if _, ok := tk.Lookup(context.Background(), bad); ok {
			t.Errorf("token %q accepted", bad)
		}
	}
}

func TestParseTokensErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"tok,alice\n", "line 1: want token,user,uid"},
		{",alice,u\n", "line 1: token: must not be empty"},
		{"a b,alice,u\n", "token: must not contain spaces"},
		{"tok,,u\n", "line 1: user: must not be empty"},
		{"tok,a,u\ntok,b,u\n", "line 2: token: duplicate"},
		{"tok,\"a,u\n", "token file"},
	} {
		_, err := ParseTokens(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want %q", c.in, err, c.want)
		}
	}
}

func TestEnsureTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	tok, err := EnsureTokenFile(path)
	if err != nil || len(tok) < 40 {
		t.Fatalf("token %q err %v", tok, err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	again, err := EnsureTokenFile(path)
	if err != nil || again != tok {
		t.Fatalf("second start: %q %v, want the same token", again, err)
	}
	tk, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := tk.Lookup(context.Background(), tok); !ok || u.Name != "admin" || !u.InGroup(GroupMasters) {
		t.Errorf("admin token maps to %+v %v", u, ok)
	}
}

func TestParseBearer(t *testing.T) {
	for in, want := range map[string]string{"Bearer abc": "abc", "bearer abc": "abc", "  Bearer   abc  ": "abc", "Bearer": "", "Basic abc": "", "Bearer a b": "", "Bearer ": ""} {
		got, ok := ParseBearer(in)
		if got != want || ok != (want != "") {
			t.Errorf("ParseBearer(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
}

func TestAuthenticator(t *testing.T) {
	b, err := pki.Ensure(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.Ensure(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := ParseTokens(strings.NewReader("good,alice,u1,dev\n"))
	a := &Authenticator{Tokens: tk, ClientCA: b.CertPool()}
	certOf := func(pemBytes []byte) *x509.Certificate {
		blk, _ := pem.Decode(pemBytes)
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, c := range []struct {
		name, header string
		cert         *x509.Certificate
		user         string
		found        bool
		invalid      bool
	}{
		{name: "none"},
		{name: "good token", header: "Bearer good", user: "alice", found: true},
		{name: "bad token", header: "Bearer nope", found: true, invalid: true},
		{name: "basic auth", header: "Basic Zm9vOmJhcg==", found: true, invalid: true},
		{name: "admin cert", cert: certOf(b.AdminCertPEM), user: "admin", found: true},
		{name: "cert of another CA", cert: certOf(other.AdminCertPEM), found: true, invalid: true},
	} {
		r := httptest.NewRequest("GET", "/api/v1/pods", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		if c.cert != nil {
			r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c.cert}}
		}
		u, found, err := a.Authenticate(r)
		if found != c.found || (err != nil) != c.invalid || u.Name != c.user {
			t.Errorf("%s: user %q found %v err %v", c.name, u.Name, found, err)
		}
		if c.user == "admin" && !u.InGroup(GroupMasters) {
			t.Errorf("admin cert groups %v lack system:masters", u.Groups)
		}
	}
}

func FuzzParseTokens(f *testing.F) {
	f.Add("tok,alice,u1,\"a,b\"\n")
	f.Add("tok,alice\n\"")
	f.Fuzz(func(t *testing.T, in string) {
		tk, err := ParseTokens(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, e := range tk.entries {
			if e.User.Name == "" || !e.User.InGroup(GroupAuthenticated) {
				t.Fatalf("accepted entry %+v", e.User)
			}
		}
	})
}

func FuzzParseBearer(f *testing.F) {
	f.Add("Bearer abc")
	f.Add("bearer \t x")
	f.Fuzz(func(t *testing.T, in string) {
		tok, ok := ParseBearer(in)
		if ok && (tok == "" || strings.ContainsAny(tok, " \t\r\n")) {
			t.Fatalf("ParseBearer(%q) = %q", in, tok)
		}
	})
}
