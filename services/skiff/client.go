package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/schemas"
)

// defaultServer is where `skiff up` listens by default.
const defaultServer = "https://127.0.0.1:6443"

// connection is the resolved way to the apiserver, built once per command.
type connection struct {
	once sync.Once
	t    apiclient.HTTP
}

// transport reaches the apiserver as the kubeconfig says ($KUBECONFIG, else --kubeconfig, else
// the one `skiff up` wrote into the data directory), with --server, --token and
// --insecure-skip-tls-verify (and SKIFF_SERVER, SKIFF_TOKEN) overriding it.
func (g *globals) transport() apiclient.HTTP {
	g.conn.once.Do(func() {
		t, err := g.resolve()
		if err != nil {
			t = apiclient.HTTP{Server: g.server, Client: &http.Client{Transport: failing{err}}}
		}
		g.conn.t = t
	})
	return g.conn.t
}

func (g *globals) client() *apiclient.Client {
	return &apiclient.Client{T: g.transport()}
}

// kubeconfigRules finds the kubeconfig to use; nil = none.
func (g *globals) kubeconfigRules() *clientcmd.ClientConfigLoadingRules {
	switch {
	case g.kubeconfig != "":
		return &clientcmd.ClientConfigLoadingRules{ExplicitPath: g.kubeconfig}
	case os.Getenv("KUBECONFIG") != "":
		return &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(os.Getenv("KUBECONFIG"))}
	}
	path := filepath.Join(defaultDataDir(), kubeconfigName)
	if _, err := os.Stat(path); err == nil {
		return &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	}
	return nil
}

func (g *globals) resolve() (apiclient.HTTP, error) {
	cfg := &rest.Config{Host: defaultServer}
	if rules := g.kubeconfigRules(); rules != nil {
		over := &clientcmd.ConfigOverrides{}
		var err error
		if cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, over).ClientConfig(); err != nil {
			return apiclient.HTTP{}, fmt.Errorf("kubeconfig: %w", err)
		}
	}
	if g.serverSet {
		cfg.Host = g.server
	}
	if g.token != "" {
		cfg.BearerToken, cfg.BearerTokenFile = g.token, ""
		// A token replaces the kubeconfig's identity rather than adding a second one.
		cfg.CertData, cfg.KeyData, cfg.CertFile, cfg.KeyFile = nil, nil, "", ""
	}
	if g.insecure {
		cfg.Insecure = true
		cfg.CAData, cfg.CAFile = nil, ""
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return apiclient.HTTP{}, fmt.Errorf("kubeconfig: %w", err)
	}
	token := cfg.BearerToken
	if token == "" && cfg.BearerTokenFile != "" {
		data, err := os.ReadFile(cfg.BearerTokenFile)
		if err != nil {
			return apiclient.HTTP{}, fmt.Errorf("kubeconfig: %w", err)
		}
		token = strings.TrimSpace(string(data))
	}
	host := cfg.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	// No client timeout: watches and log streams stay open; requests carry contexts.
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true}
	return apiclient.HTTP{Server: host, Token: token, Client: &http.Client{Transport: tr}}, nil
}

// failing reports a configuration error at the first request, where commands print errors.
type failing struct{ err error }

func (f failing) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }

// kindsArg resolves "deploy,svc" into kinds, in the order given.
func kindsArg(arg string) ([]*schemas.Kind, error) {
	var out []*schemas.Kind
	for _, name := range strings.Split(arg, ",") {
		k, ok := schemas.Lookup(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("the server doesn't have a resource type %q", name)
		}
		out = append(out, k)
	}
	return out, nil
}

// objectArg reads one object named as kubectl accepts it: "TYPE NAME" or "TYPE/NAME".
func objectArg(args []string) (*schemas.Kind, string, error) {
	typ, name := "", ""
	switch {
	case len(args) == 2 && !strings.Contains(args[0], "/"):
		typ, name = args[0], args[1]
	case len(args) == 1:
		var ok bool
		if typ, name, ok = strings.Cut(args[0], "/"); !ok {
			return nil, "", fmt.Errorf("want TYPE NAME or TYPE/NAME, got %q", args[0])
		}
	default:
		return nil, "", fmt.Errorf("want TYPE NAME or TYPE/NAME, got %q", strings.Join(args, " "))
	}
	if name == "" {
		return nil, "", fmt.Errorf("no name in %q", strings.Join(args, " "))
	}
	kinds, err := kindsArg(typ)
	if err != nil {
		return nil, "", err
	}
	if len(kinds) != 1 {
		return nil, "", fmt.Errorf("want one resource type, got %q", typ)
	}
	return kinds[0], name, nil
}

// qualifiedName is kubectl's "deployment.apps/web" form.
func qualifiedName(k *schemas.Kind, name string) string {
	if k.GVK.Group == "" {
		return k.Singular + "/" + name
	}
	return k.Singular + "." + k.GVK.Group + "/" + name
}
