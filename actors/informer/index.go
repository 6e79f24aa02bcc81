package informer

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// IndexFunc names the index values an object is filed under (none: not in the index).
type IndexFunc func(obj runtime.Object) []string

// Indexes every informer of this package keeps or that controllers share.
const (
	IndexNamespace     = "namespace"                           // every informer
	IndexNodeName      = "spec.nodeName"                       // pods: by the node they are bound to
	IndexControllerUID = "metadata.ownerReferences.controller" // any kind: by its controller's UID
)

// namespaceIndex needs only GetNamespace, which a transform's own types have too.
func namespaceIndex(obj runtime.Object) []string {
	m, ok := obj.(interface{ GetNamespace() string })
	if !ok {
		return nil
	}
	return []string{m.GetNamespace()}
}

// ControllerUIDIndex files an object under the UID of its controller (the owner reference
// with controller set), if it has one: what an owner controls is then found without a look
// at any object's owner references.
func ControllerUIDIndex(obj runtime.Object) []string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	ref := metav1.GetControllerOfNoCopy(m)
	if ref == nil {
		return nil
	}
	return []string{string(ref.UID)}
}

// indexes maps index name -> value -> the objects filed under it by storage key; an update
// refiles a key from its old object's values to its new one's. The sets hold the objects
// themselves, so a read costs what it returns, without a second lookup of each key.
type indexes struct {
	funcs  map[string]IndexFunc
	values map[string]map[string]objectSet
}

func (x *indexes) init() {
	x.funcs = map[string]IndexFunc{}
	x.values = map[string]map[string]objectSet{}
}

func (x *indexes) add(name string, f IndexFunc, objects map[string]runtime.Object) {
	x.funcs[name] = f
	x.values[name] = map[string]objectSet{}
	for key, o := range objects {
		x.fileUnder(name, key, o, f(o))
	}
}

// fileUnder puts key's object in the sets of values (replacing the one it held).
func (x *indexes) fileUnder(name, key string, obj runtime.Object, values []string) {
	vals := x.values[name]
	for _, v := range values {
		set := vals[v]
		set.put(key, obj)
		vals[v] = set
	}
}

// update refiles key from old (nil: new key) to obj (nil: deleted). An index whose values
// for the key did not change (a pod's status write, for most) keeps the key where it is,
// with the new object.
func (x *indexes) update(key string, old, obj runtime.Object) {
	for name, f := range x.funcs {
		var was, now []string
		if old != nil {
			was = f(old)
		}
		if obj != nil {
			now = f(obj)
		}
		if old == nil || obj == nil || !slices.Equal(was, now) {
			vals := x.values[name]
			for _, v := range was {
				if set, ok := vals[v]; ok {
					if set.remove(key); set.len() == 0 {
						delete(vals, v)
					} else {
						vals[v] = set
					}
				}
			}
		}
		x.fileUnder(name, key, obj, now)
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
	out := make([]runtime.Object, 0, set.len())
	set.each(func(_ string, obj runtime.Object) { out = append(out, obj) })
	return out
}

// IndexLen is how many objects are filed under value in the named index.
func (i *Informer) IndexLen(name, value string) int {
	i.mu.RLock()
	defer i.mu.RUnlock()
	set := i.indexes.values[name][value]
	return set.len()
}

// PodNodeName files a pod under the node it is bound to (unbound pods under "").
func PodNodeName(obj runtime.Object) []string {
	if p, ok := obj.(*corev1.Pod); ok {
		return []string{p.Spec.NodeName}
	}
	return nil
}

// objectSet is the objects filed under one index value, by storage key. Most values name
// one object or a few (a Service's slices, an owner's children, a node's pods on a small
// node): a short slice holds them in a fraction of a map's bytes (a one-key map is about 200),
// and past smallSet keys the set becomes a map (and stays one).
type objectSet struct {
	few  []filed
	many map[string]runtime.Object
}

type filed struct {
	key string
	obj runtime.Object
}

const smallSet = 8

// put files obj under key, replacing what key held.
func (s *objectSet) put(key string, obj runtime.Object) {
	if s.many != nil {
		s.many[key] = obj
		return
	}
	if i := slices.IndexFunc(s.few, func(f filed) bool { return f.key == key }); i >= 0 {
		s.few[i].obj = obj
		return
	}
	if len(s.few) < smallSet {
		s.few = append(s.few, filed{key, obj})
		return
	}
	s.many = make(map[string]runtime.Object, len(s.few)+1)
	for _, f := range s.few {
		s.many[f.key] = f.obj
	}
	s.many[key] = obj
	s.few = nil
}

func (s *objectSet) remove(key string) {
	if s.many != nil {
		delete(s.many, key)
		return
	}
	if i := slices.IndexFunc(s.few, func(f filed) bool { return f.key == key }); i >= 0 {
		// Order is free: the last one takes the removed one's place.
		last := len(s.few) - 1
		s.few[i] = s.few[last]
		s.few[last] = filed{}
		s.few = s.few[:last]
		if last == 0 {
			s.few = nil
		}
	}
}

func (s *objectSet) len() int { return len(s.few) + len(s.many) }

func (s *objectSet) each(f func(key string, obj runtime.Object)) {
	for _, e := range s.few {
		f(e.key, e.obj)
	}
	for k, o := range s.many {
		f(k, o)
	}
}
