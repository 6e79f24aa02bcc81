package main

import (
	"fmt"
	"strings"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/schemas"
)

func (g *globals) transport() apiclient.HTTP {
	return apiclient.HTTP{Server: g.server, Token: g.token}
}

func (g *globals) client() *apiclient.Client {
	return &apiclient.Client{T: g.transport()}
}

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

// qualifiedName is kubectl's "deployment.apps/web" form.
func qualifiedName(k *schemas.Kind, name string) string {
	if k.GVK.Group == "" {
		return k.Singular + "/" + name
	}
	return k.Singular + "." + k.GVK.Group + "/" + name
}
