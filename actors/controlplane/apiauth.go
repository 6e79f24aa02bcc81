package controlplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/skiff-sh/skiff/actors/apiserver"
	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/actors/apiserver/authn/serviceaccount"
	"github.com/skiff-sh/skiff/actors/apiserver/authz"
	"github.com/skiff-sh/skiff/internal/pki"
)

// APIAuth turns on the apiserver's HTTPS, authentication and RBAC (Config.APIAuth; NATS is
// secured separately, secure.go). The CA and certificates
// (DataDir/tls) and the token file (DataDir/tokens.csv, with an admin token) are generated on
// first start and reused after.
type APIAuth struct {
	Enabled bool
	SANs    []string // extra names and IPs of the serving certificate
	// Made elsewhere and shared by every apiserver replica (`skiff cluster-creds`), read and
	// never written; empty: DataDir/tls and DataDir/tokens.csv, made on first start.
	TLSDir, TokenFile string
	// Each user's budget (apiserver/ratelimit.go): requests per second, burst, requests in
	// flight; 0 = the default, negative = no limit.
	ClientQPS      float64
	ClientBurst    int
	ClientInflight int
}

// Files under DataDir.
const (
	TLSDir    = "tls"
	TokenFile = "tokens.csv"
)

// controlPlaneUser is who in-process components are over NATS until NATS carries identities.
var controlPlaneUser = authn.User{Name: "system:skiff-control-plane", Groups: []string{authn.GroupMasters, authn.GroupAuthenticated}}

type apiAuthState struct {
	pki        *pki.Bundle
	adminToken string
	rbac       *authz.RBAC
	node       *authz.Node // in front of rbac: Secrets and ConfigMaps for node identities
}

// apiOptions fills in the security part of the apiserver's options.
func (cp *ControlPlane) apiOptions(o apiserver.Options) (apiserver.Options, error) {
	sc := cp.cfg.APIAuth
	if !sc.Enabled {
		return o, nil
	}
	if cp.cfg.DataDir == "" {
		return o, errors.New("controlplane: APIAuth needs a DataDir for its certificates and tokens")
	}
	inCluster, err := cp.inClusterSANs()
	if err != nil {
		return o, err
	}
	bundle, err := sc.certificates(cp.cfg.DataDir, inCluster)
	if err != nil {
		return o, fmt.Errorf("certificates: %w", err)
	}
	tokPath := filepath.Join(cp.cfg.DataDir, TokenFile)
	if sc.TokenFile != "" {
		// Given, not made: a missing file is a mistake, not a first start.
		if _, err := os.Stat(sc.TokenFile); err != nil {
			return o, fmt.Errorf("tokens: %w", err)
		}
		tokPath = sc.TokenFile
	}
	admin, err := authn.EnsureTokenFile(tokPath)
	if err != nil {
		return o, fmt.Errorf("tokens: %w", err)
	}
	tokens, err := authn.OpenTokenFile(tokPath, authn.DefaultTokenCheck, cp.cfg.Logger)
	if err != nil {
		return o, fmt.Errorf("tokens: %w", err)
	}
	issuer, err := cp.cfg.serviceAccountIssuer()
	if err != nil {
		return o, err
	}
	saTokens := &serviceaccount.Authenticator{Issuer: issuer, Log: cp.Log, Logger: cp.cfg.Logger}
	o.ServiceAccountIssuer = issuer
	rbac := authz.NewRBAC(cp.Log)
	cp.apiAuth = &apiAuthState{pki: bundle, adminToken: admin, rbac: rbac, node: authz.NewNode(cp.Log, cp.Informers.For("", "pods"), rbac)}
	wire := controlPlaneUser
	o.Auth = &apiserver.Auth{
		Authenticator: &authn.Authenticator{Tokens: tokenChain{tokens, saTokens}, ClientCA: bundle.CertPool()},
		Authorizer:    cp.apiAuth.node,
		WireUser:      &wire,
	}
	o.ClientQPS, o.ClientBurst, o.ClientInflight = sc.ClientQPS, sc.ClientBurst, sc.ClientInflight
	return o, nil
}

// validate refuses files given for a security that is off: they would be ignored.
func (sc APIAuth) validate() error {
	if !sc.Enabled && (sc.TLSDir != "" || sc.TokenFile != "") {
		return errors.New("APIAuth: a TLS directory (--tls-dir) or token file (--token-file) needs the API's authentication on (--api-auth)")
	}
	return nil
}

// certificates loads the given TLSDir, or keeps the one under dataDir, covering the --tls-san
// names and inCluster.
func (sc APIAuth) certificates(dataDir string, inCluster []string) (*pki.Bundle, error) {
	if sc.TLSDir != "" {
		return pki.Load(sc.TLSDir)
	}
	return pki.Ensure(filepath.Join(dataDir, TLSDir), append(slices.Clone(sc.SANs), inCluster...))
}

// inClusterSANs are the names pods reach the API by (rest.InClusterConfig dials the
// `kubernetes` Service's ClusterIP; others use its DNS names), as kube-apiserver's certificate
// always covers them.
func (cp *ControlPlane) inClusterSANs() ([]string, error) {
	ip, err := cp.firstServiceIP()
	if err != nil {
		return nil, fmt.Errorf("ServiceCIDR (--service-cidr): %w", err)
	}
	return []string{ip, kubernetesService, kubernetesService + ".default", kubernetesService + ".default.svc",
		kubernetesService + ".default.svc.cluster.local"}, nil
}

// startRBAC writes the bootstrap policy and waits until the authorizer's mirror holds it.
func (cp *ControlPlane) startRBAC(ctx context.Context) error {
	if cp.apiAuth == nil {
		return nil
	}
	if err := cp.API.EnsureBootstrapPolicy(ctx); err != nil {
		return err
	}
	cp.apiAuth.rbac.Run(cp.bg)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if !cp.apiAuth.rbac.WaitForSync(ctx) || !cp.apiAuth.node.WaitForSync(ctx) {
		return errors.New("controlplane: RBAC policy did not load")
	}
	return nil
}

// serverTLS is the HTTPS config of the API (nil = plain HTTP).
func (cp *ControlPlane) serverTLS() *tls.Config {
	if cp.apiAuth == nil {
		return nil
	}
	return cp.apiAuth.pki.ServerTLS()
}

// PKI is the control plane's certificates (nil without APIAuth).
func (cp *ControlPlane) PKI() *pki.Bundle {
	if cp.apiAuth == nil {
		return nil
	}
	return cp.apiAuth.pki
}

// AdminToken is the admin's bearer token from the token file ("" without APIAuth).
func (cp *ControlPlane) AdminToken() string {
	if cp.apiAuth == nil {
		return ""
	}
	return cp.apiAuth.adminToken
}
