package schemas

// clusterScoped stands in for the namespace of cluster-scoped objects so every key has four
// segments and a namespace prefix never matches a cluster-scoped key.
const clusterScoped = "_"

func groupSegment(k *Kind) string {
	if k.GVK.Group == "" {
		return "core"
	}
	return k.GVK.Group
}

// StorageKey is the state-log key of one object: "<group or core>/<resource>/<namespace or _>/<name>",
// e.g. "core/pods/default/web", "core/nodes/_/n1".
func StorageKey(k *Kind, namespace, name string) string {
	return StoragePrefix(k, namespace) + name
}

// StoragePrefix is the key prefix of a kind's objects in one namespace ("core/pods/default/"), or
// of all of them when namespace is "" on a namespaced kind ("core/pods/"). Cluster-scoped kinds
// ignore namespace ("core/nodes/_/").
func StoragePrefix(k *Kind, namespace string) string {
	base := groupSegment(k) + "/" + k.Resource + "/"
	if !k.Namespaced {
		return base + clusterScoped + "/"
	}
	if namespace == "" {
		return base
	}
	return base + namespace + "/"
}
