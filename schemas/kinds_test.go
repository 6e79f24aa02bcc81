package schemas_test

import (
	"reflect"
	"testing"

	"github.com/skiff-sh/skiff/schemas"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestLookup(t *testing.T) {
	cases := map[string]string{
		"deploy": "deployments", "deployments": "deployments", "deployment": "deployments", "Deployment": "deployments",
		"deployment.apps": "deployments", "deployments.v1.apps": "deployments", "DEPLOY": "deployments",
		"po": "pods", "pod": "pods", "pods.v1.core": "pods", "svc": "services", "no": "nodes", "ns": "namespaces",
		"cm": "configmaps", "ev": "events", "rs": "replicasets", "ds": "daemonsets", "sts": "statefulsets", "controllerrevision": "controllerrevisions", "secret": "secrets", "sa": "serviceaccounts",
		"pv": "persistentvolumes", "pvc": "persistentvolumeclaims", "sc": "storageclasses", "netpol": "networkpolicies", "networkpolicy.networking.k8s.io": "networkpolicies", "storageclass.storage.k8s.io": "storageclasses",
		"endpointslices": "endpointslices", "endpointslice.discovery.k8s.io": "endpointslices",
		"leases.v1.coordination.k8s.io": "leases", "lease": "leases", " svc ": "services",
	}
	for in, want := range cases {
		k, ok := schemas.Lookup(in)
		if !ok || k.Resource != want {
			t.Errorf("Lookup(%q) = %v, %v; want %s", in, k, ok, want)
		}
	}
	for _, in := range []string{"", "widgets", "deploy.core", "pods.apps", "deployments.v2.apps", "po.v1"} {
		if k, ok := schemas.Lookup(in); ok {
			t.Errorf("Lookup(%q) = %s; want no match", in, k.Resource)
		}
	}
}

func TestKindsAreConsistent(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range schemas.Kinds() {
		if seen[k.Resource] != (k.StoredAs != nil) {
			t.Errorf("%s: served before %v, stored as %v: a second version must be stored as the first", k.Resource, seen[k.Resource], k.StoredAs)
		}
		seen[k.Resource] = true
		if stored := schemas.Stored(k); stored.Resource != k.Resource || stored.StoredAs != nil || stored.GVK.Group != k.GVK.Group {
			t.Errorf("%s is stored as %v", k.GVK, stored.GVK)
		}
		if got, ok := schemas.ByResource(k.GVK.Group, k.GVK.Version, k.Resource); !ok || got != k {
			t.Errorf("ByResource(%v) = %v", k.GroupVersionResource(), got)
		}
		if got, ok := schemas.ByGVK(k.GVK); !ok || got != k {
			t.Errorf("ByGVK(%v) = %v", k.GVK, got)
		}
		if got, ok := schemas.Lookup(k.Resource); !ok || got != schemas.Stored(k) {
			t.Errorf("Lookup(%s) = %v", k.Resource, got)
		}
		obj, list := k.New(), k.NewList()
		gvks, _, err := schemas.Scheme.ObjectKinds(obj)
		if err != nil || len(gvks) != 1 || gvks[0] != k.GVK {
			t.Errorf("%s: scheme kinds %v, %v; want %v", k.Resource, gvks, err, k.GVK)
		}
		lgvks, _, err := schemas.Scheme.ObjectKinds(list)
		if err != nil || lgvks[0] != k.GVK.GroupVersion().WithKind(k.ListKind) {
			t.Errorf("%s: list kinds %v, %v; want %s", k.Resource, lgvks, err, k.ListKind)
		}
		if !meta.IsListType(list) {
			t.Errorf("%s: NewList is not a list", k.Resource)
		}
		if reflect.ValueOf(k.New()).Pointer() == reflect.ValueOf(obj).Pointer() {
			t.Errorf("%s: New returns a shared object", k.Resource)
		}
	}
	if len(seen) != 29 || len(schemas.Kinds()) != 30 {
		t.Errorf("%d resources in %d kinds; want 29 in 30 (HorizontalPodAutoscaler in two versions)", len(seen), len(schemas.Kinds()))
	}
	for _, gvk := range []schema.GroupVersionKind{
		{Version: "v1", Kind: "Binding"}, {Group: "autoscaling", Version: "v1", Kind: "Scale"},
		{Version: "v1", Kind: "Status"}, {Group: "meta.k8s.io", Version: "v1", Kind: "Table"},
		{Version: "v1", Kind: "DeleteOptions"}, {Group: "policy", Version: "v1", Kind: "Eviction"},
	} {
		if !schemas.Scheme.Recognizes(gvk) {
			t.Errorf("scheme does not know %v", gvk)
		}
	}
}

func TestSubresources(t *testing.T) {
	want := map[string][]string{
		"pods": {"status", "binding", "log", "exec", "attach", "portforward", "eviction"}, "deployments": {"status", "scale"},
		"replicasets": {"status", "scale"}, "configmaps": nil,
	}
	for res, subs := range want {
		k, _ := schemas.ByResource(groupOf(res), "v1", res)
		if !reflect.DeepEqual(k.Subresources, subs) {
			t.Errorf("%s: %v; want %v", res, k.Subresources, subs)
		}
	}
	pods, _ := schemas.Lookup("pods")
	if !pods.HasSubresource("exec") || pods.HasSubresource("scale") {
		t.Error("HasSubresource")
	}
}

func groupOf(res string) string {
	if res == "deployments" || res == "replicasets" {
		return "apps"
	}
	return ""
}

func TestStorageKeys(t *testing.T) {
	pods, _ := schemas.Lookup("pods")
	deploy, _ := schemas.Lookup("deploy")
	nodes, _ := schemas.Lookup("nodes")
	slices, _ := schemas.Lookup("endpointslices")
	cases := []struct{ got, want string }{
		{schemas.StorageKey(pods, "default", "web"), "core/pods/default/web"},
		{schemas.StorageKey(deploy, "default", "web"), "apps/deployments/default/web"},
		{schemas.StorageKey(nodes, "", "n1"), "core/nodes/_/n1"},
		{schemas.StorageKey(nodes, "ignored", "n1"), "core/nodes/_/n1"},
		{schemas.StorageKey(slices, "shop", "web-abc"), "discovery.k8s.io/endpointslices/shop/web-abc"},
		{schemas.StoragePrefix(pods, "default"), "core/pods/default/"},
		{schemas.StoragePrefix(pods, ""), "core/pods/"},
		{schemas.StoragePrefix(nodes, ""), "core/nodes/_/"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q; want %q", c.got, c.want)
		}
	}
	// A namespace's prefix must not match a namespace that merely starts with the same name.
	if p := schemas.StoragePrefix(pods, "de"); len(schemas.StorageKey(pods, "default", "x")) > len(p) &&
		schemas.StorageKey(pods, "default", "x")[:len(p)] == p {
		t.Error("prefix of namespace de matches namespace default")
	}
}
