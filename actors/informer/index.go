package informer

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// IndexFunc names the index values an object is filed under (none: not in the index).
type IndexFunc func(obj runtime.Object) []string

// Indexes every informer of this package keeps or that controllers share.
const (
	IndexNamespace = "namespace"                    // every informer
	IndexNodeName  = "spec.nodeName"                // pods: by the node they are bound to
	IndexOwnerUID  = "metadata.ownerReferences.uid" // any kind: by each owner's UID
)

// namespaceIndex needs only GetNamespace, which a transform's own types have too.
func namespaceIndex(obj runtime.Object) []string {
	m, ok := obj.(interface{ GetNamespace() string })
	if !ok {
		return nil
	}
	return []string{m.GetNamespace()}
}

// OwnerUIDIndex files an object under the UID of each of its owners.
func OwnerUIDIndex(obj runtime.Object) []string {
	m, err := meta.Accessor(obj)
	if err != nil || len(m.GetOwnerReferences()) == 0 {
		return nil
	}
	out := make([]string, 0, len(m.GetOwnerReferences()))
	for _, r := range m.GetOwnerReferences() {
		out = append(out, string(r.UID))
	}
	return out
}

// indexes maps index name -> value -> set of storage keys, and remembers each key's values so an
// update moves it without rescanning.
type indexes struct {
	funcs  map[string]IndexFunc
	values map[string]map[string]map[string]struct{}
}

func (x *indexes) init() {
	x.funcs = map[string]IndexFunc{}
	x.values = map[string]map[string]map[string]struct{}{}
}

func (x *indexes) add(name string, f IndexFunc, objects map[string]runtime.Object) {
	x.funcs[name] = f
	x.values[name] = map[string]map[string]struct{}{}
	for key, o := range objects {
		x.file(name, key, o)
	}
}

func (x *indexes) file(name, key string, obj runtime.Object) {
	for _, v := range x.funcs[name](obj) {
		set := x.values[name][v]
		if set == nil {
			set = map[string]struct{}{}
			x.values[name][v] = set
		}
		set[key] = struct{}{}
	}
}

// update refiles key from old (nil: new key) to obj (nil: deleted).
func (x *indexes) update(key string, old, obj runtime.Object) {
	for name, f := range x.funcs {
		if old != nil {
			for _, v := range f(old) {
				if set := x.values[name][v]; set != nil {
					delete(set, key)
					if len(set) == 0 {
						delete(x.values[name], v)
					}
				}
			}
		}
		if obj != nil {
			x.file(name, key, obj)
		}
	}
}

// AddIndexer adds a named index (a no-op when the name is taken: the index is shared) and
// files the cached objects in it.
func (i *Informer) AddIndexer(name string, f IndexFunc) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if _, ok := i.indexes.funcs[name]; ok {
		return
	}
	i.indexes.add(name, f, i.objects)
}

// ByIndex returns the cached objects filed under value in the named index, in no particular
// order; it costs what it returns, not the size of the cache. An unknown index panics: it is a
// programming error.
func (i *Informer) ByIndex(name, value string) []runtime.Object {
	i.mu.RLock()
	defer i.mu.RUnlock()
	vals, ok := i.indexes.values[name]
	if !ok {
		panic("informer " + i.kind.Resource + ": no index " + name)
	}
	set := vals[value]
	out := make([]runtime.Object, 0, len(set))
	for key := range set {
		out = append(out, i.objects[key])
	}
	return out
}

// IndexLen is how many objects are filed under value in the named index.
func (i *Informer) IndexLen(name, value string) int {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return len(i.indexes.values[name][value])
}

// PodNodeName files a pod under the node it is bound to (unbound pods under "").
func PodNodeName(obj runtime.Object) []string {
	if p, ok := obj.(*corev1.Pod); ok {
		return []string{p.Spec.NodeName}
	}
	return nil
}
