// Package serviceaccount issues and verifies the ServiceAccount tokens of TokenRequest: JWTs
// signed ES256 with the issuer's key, carrying the claims kube-apiserver writes (the
// kubernetes.io block naming the namespace, the account and the object the token is bound
// to), and serves the key as OIDC discovery and a JWKS.
package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/skiff-sh/skiff/internal/pki"
)

// DefaultIssuer is kube-apiserver's usual --service-account-issuer.
const DefaultIssuer = "https://kubernetes.default.svc.cluster.local"

// KeyFileName is the signing key's file beside the data dir's other keys.
const KeyFileName = "service-account.key"

// Paths of OIDC discovery, as kube-apiserver serves them.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	JWKSPath      = "/openid/v1/jwks"
)

// Issuer signs and verifies tokens with one key.
type Issuer struct {
	URL       string   // the iss claim
	Audiences []string // the API's audiences (--api-audiences): a token must name one; default URL
	key       *ecdsa.PrivateKey
	keyID     string
	signer    jose.Signer
}

// NewIssuer returns the issuer url (DefaultIssuer when "") signing with key.
func NewIssuer(url string, key *ecdsa.PrivateKey) (*Issuer, error) {
	if url == "" {
		url = DefaultIssuer
	}
	kid, err := keyID(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, err
	}
	return &Issuer{URL: url, Audiences: []string{url}, key: key, keyID: kid, signer: signer}, nil
}

// keyID is what kube-apiserver uses: the unpadded base64url SHA-256 of the public key's DER, so
// every replica holding the same key names it the same.
func keyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// LoadOrCreateKey reads the P-256 signing key at path, or makes one there (0600) on first
// start. Apiserver replicas that share the file issue tokens each other accepts.
func LoadOrCreateKey(path string) (*ecdsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		if err := pki.WriteFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			return nil, err
		}
		return key, nil
	}
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "EC PRIVATE KEY" {
		return nil, fmt.Errorf("%s: not a PEM \"EC PRIVATE KEY\"", filepath.Base(path))
	}
	key, err := x509.ParseECPrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	if key.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%s: want a P-256 key for ES256", filepath.Base(path))
	}
	return key, nil
}

// Mint signs c, setting its issuer, and returns the token.
func (i *Issuer) Mint(c Claims) (string, error) {
	c.Issuer = i.URL
	return jwt.Signed(i.signer).Claims(c.public()).Claims(c.private()).Serialize()
}

// Verification errors (all mean 401 to the caller).
var (
	ErrNotOurs      = errors.New("not a token of this issuer")
	ErrExpired      = errors.New("token has expired")
	ErrWrongAudence = errors.New("token audiences are not accepted by this server")
)

// Verify checks the signature, issuer, audiences and times of token at now and returns its
// claims. It does not look at the objects the token names (Authenticator does).
func (i *Issuer) Verify(token string, now time.Time) (*Claims, error) {
	return i.VerifyFor(token, now, nil)
}

// VerifyFor is Verify for the given audiences (nil: the API's); the claims' Audiences are then
// the token's audiences among them, as kube reports them.
func (i *Issuer) VerifyFor(token string, now time.Time, audiences []string) (*Claims, error) {
	if len(audiences) == 0 {
		audiences = i.Audiences
	}
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return nil, ErrNotOurs
	}
	var pub jwt.Claims
	var priv privateClaims
	if err := tok.Claims(&i.key.PublicKey, &pub, &priv); err != nil {
		return nil, ErrNotOurs
	}
	if pub.Issuer != i.URL {
		return nil, ErrNotOurs
	}
	var matched []string
	for _, a := range audiences {
		if pub.Audience.Contains(a) {
			matched = append(matched, a)
		}
	}
	if len(matched) == 0 {
		return nil, ErrWrongAudence
	}
	// No leeway: the signer and the verifier are the same cluster's clocks.
	if err := pub.ValidateWithLeeway(jwt.Expected{Time: now}, 0); err != nil {
		if errors.Is(err, jwt.ErrExpired) {
			return nil, ErrExpired
		}
		return nil, fmt.Errorf("token times: %w", err)
	}
	if pub.Expiry == nil || priv.Kubernetes.Namespace == "" || priv.Kubernetes.ServiceAccount.Name == "" {
		return nil, ErrNotOurs
	}
	c := claimsOf(pub, priv)
	c.Audiences = matched
	return c, nil
}

// JWKS is the public key set (/openid/v1/jwks).
func (i *Issuer) JWKS() []byte {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &i.key.PublicKey, KeyID: i.keyID, Algorithm: string(jose.ES256), Use: "sig"}}}
	b, _ := json.Marshal(set)
	return b
}

// Discovery is the OIDC discovery document (/.well-known/openid-configuration) as kube serves
// it: the JWKS is found under the issuer's URL.
func (i *Issuer) Discovery() []byte {
	b, _ := json.Marshal(map[string]any{
		"issuer":                                i.URL,
		"jwks_uri":                              i.URL + JWKSPath,
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{string(jose.ES256)},
	})
	return b
}
