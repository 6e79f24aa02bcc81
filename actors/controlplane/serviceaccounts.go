package controlplane

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/skiff-sh/skiff/actors/apiserver"
	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/actors/apiserver/authn/serviceaccount"
	"github.com/skiff-sh/skiff/actors/controllers"
)

// serviceAccountKeyPath is where the token signing key lives (Config.ServiceAccountKeyFile).
func (c Config) serviceAccountKeyPath() (string, error) {
	switch {
	case c.ServiceAccountKeyFile != "":
		return c.ServiceAccountKeyFile, nil
	case c.NATSURL != "" && c.EncryptionKeyFile != "":
		return filepath.Join(filepath.Dir(c.EncryptionKeyFile), serviceaccount.KeyFileName), nil
	case c.NATSURL != "":
		return "", errors.New("ServiceAccountKeyFile (--service-account-key-file): an apiserver on an external NATS needs the signing key every replica shares")
	case c.DataDir != "":
		return filepath.Join(c.DataDir, serviceaccount.KeyFileName), nil
	}
	return "", errors.New("ServiceAccountKeyFile: API auth needs a DataDir or a key file")
}

// serviceAccountIssuer loads (or makes) the signing key and returns the issuer.
func (c Config) serviceAccountIssuer() (*serviceaccount.Issuer, error) {
	path, err := c.serviceAccountKeyPath()
	if err != nil {
		return nil, err
	}
	key, err := serviceaccount.LoadOrCreateKey(path)
	if err != nil {
		return nil, fmt.Errorf("service account key: %w", err)
	}
	return serviceaccount.NewIssuer(c.ServiceAccountIssuer, key)
}

// tokenChain tries each lookup in turn: static tokens first, then ServiceAccount JWTs.
type tokenChain []authn.TokenLookup

func (t tokenChain) Lookup(ctx context.Context, token string) (authn.User, bool) {
	for _, l := range t {
		if u, ok := l.Lookup(ctx, token); ok {
			return u, true
		}
	}
	return authn.User{}, false
}

// controllerOptions are the controllers' options plus the CA the root CA publisher puts in
// kube-root-ca.crt: this process's API CA when it serves the API with TLS.
func (cp *ControlPlane) controllerOptions() (controllers.Options, error) {
	o := cp.cfg.Controllers
	switch {
	case len(o.RootCA) > 0:
	case cp.cfg.RootCAFile != "":
		ca, err := os.ReadFile(cp.cfg.RootCAFile)
		if err != nil {
			return o, fmt.Errorf("RootCAFile (--root-ca-file): %w", err)
		}
		if b, _ := pem.Decode(ca); b == nil || b.Type != "CERTIFICATE" {
			return o, fmt.Errorf("RootCAFile (--root-ca-file) %s: not a PEM certificate", cp.cfg.RootCAFile)
		}
		o.RootCA = ca
	case cp.PKI() != nil:
		o.RootCA = cp.PKI().CAPEM
	}
	return o, nil
}

// DataDir is where this control plane keeps its store and keys ("" in memory).
func (cp *ControlPlane) DataDir() string { return cp.cfg.DataDir }

func (c Config) serviceAccountAdmission() *apiserver.ServiceAccountAdmission {
	if !c.ServiceAccountAdmission {
		return nil
	}
	return &apiserver.ServiceAccountAdmission{Automount: c.AutomountServiceAccountTokens}
}
