package authn

import (
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ErrInvalid is a credential that was presented but is not valid (as opposed to none at all).
var ErrInvalid = errors.New("invalid credentials")

// ParseBearer extracts the token of an "Authorization: Bearer <token>" header value. The scheme
// is case-insensitive; the token must be non-empty and a single word.
func ParseBearer(header string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", false
	}
	return tok, true
}

// Authenticator finds the caller of an HTTP request from its credentials.
type Authenticator struct {
	Tokens   TokenLookup    // bearer tokens; nil = none accepted
	ClientCA *x509.CertPool // client certificates signed by this CA; nil = none accepted

	// verified remembers leaf certificates that passed verification (by SHA-256 of the DER):
	// a chain check costs more than the rest of a GET, and a client sends the same certificate
	// on every request.
	mu       sync.Mutex
	verified map[[sha256.Size]byte]time.Time // -> NotAfter
}

// maxVerified bounds the cache; it only ever holds certificates our CA signed.
const maxVerified = 4096

// Authenticate returns the caller. found is false when the request carries no credentials;
// err is ErrInvalid when it carries credentials that are not valid.
func (a *Authenticator) Authenticate(r *http.Request) (u User, found bool, err error) {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := ParseBearer(h)
		if !ok || a.Tokens == nil {
			return User{}, true, ErrInvalid
		}
		if u, ok := a.Tokens.Lookup(r.Context(), tok); ok {
			return u, true, nil
		}
		return User{}, true, ErrInvalid
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		if a.ClientCA == nil {
			return User{}, true, ErrInvalid
		}
		return a.certUser(r.TLS.PeerCertificates)
	}
	return User{}, false, nil
}

// certUser verifies the chain against the client CA (whatever the TLS config did) and reads
// CN as the user and O as the groups, as Kubernetes does.
func (a *Authenticator) certUser(chain []*x509.Certificate) (User, bool, error) {
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	leaf := chain[0]
	if !a.knownGood(chain) {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: a.ClientCA, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			return User{}, true, ErrInvalid
		}
		a.remember(chain)
	}
	if leaf.Subject.CommonName == "" {
		return User{}, true, ErrInvalid
	}
	return withAuthenticated(User{Name: leaf.Subject.CommonName, Groups: leaf.Subject.Organization}), true, nil
}

// chainKey identifies a presented chain (leaf plus intermediates), so a cached verdict is never
// reused for the same leaf offered with different intermediates.
func chainKey(chain []*x509.Certificate) [sha256.Size]byte {
	h := sha256.New()
	for _, c := range chain {
		h.Write(c.Raw)
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

func (a *Authenticator) knownGood(chain []*x509.Certificate) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	notAfter, ok := a.verified[chainKey(chain)]
	return ok && time.Now().Before(notAfter)
}

func (a *Authenticator) remember(chain []*x509.Certificate) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.verified == nil || len(a.verified) >= maxVerified {
		a.verified = map[[sha256.Size]byte]time.Time{}
	}
	a.verified[chainKey(chain)] = chain[0].NotAfter
}
