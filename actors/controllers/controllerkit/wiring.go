package controllerkit

import (
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/informer"
)

// Config is what a controller with no settings of its own needs.
type Config struct {
	Informers *informer.Factory // the process's shared informers
	Client    *apiclient.Client
	Workers   int
	Logger    *slog.Logger
}

// IndexOrphans files objects that have no controller under their namespace: the candidates
// for adoption, found without a scan of the namespace.
const IndexOrphans = "orphans"

func orphanIndex(obj runtime.Object) []string {
	m := Meta(obj)
	if metav1.GetControllerOfNoCopy(m) != nil {
		return nil
	}
	return []string{m.GetNamespace()}
}

// IndexReadyPods files the pods that are active and Ready under their controller's UID: how
// many of an owner's pods are ready is then a count (informer.IndexLen), not a walk over them.
const IndexReadyPods = "ready-pods-by-controller"

func readyPodIndex(obj runtime.Object) []string {
	p, ok := obj.(*corev1.Pod)
	if !ok || !IsPodActive(p) || !IsPodReady(p) {
		return nil
	}
	return informer.ControllerUIDIndex(p)
}

// IndexReadyOwned adds IndexReadyPods to a pod informer (shared; adding twice is a no-op).
func IndexReadyOwned(inf *informer.Informer) *informer.Informer {
	inf.AddIndexer(IndexReadyPods, readyPodIndex)
	return inf
}

// IndexOwners adds the controller-UID and orphan indexes to inf (shared; adding twice is a
// no-op).
func IndexOwners(inf *informer.Informer) *informer.Informer {
	inf.AddIndexer(informer.IndexControllerUID, informer.ControllerUIDIndex)
	inf.AddIndexer(IndexOrphans, orphanIndex)
	return inf
}

// Candidates are the objects an owner may claim, sorted by the indexes: the index already
// looked at each object's controller reference, so a claim over an owner's 30,000 pods does
// not look again.
type Candidates struct {
	Controlled []runtime.Object // controlled by the owner, matching its selector or not: Claim releases the latter
	Orphans    []runtime.Object // of the owner's namespace, without a controller
}

// ClaimCandidates are the objects an owner may claim. inf must have IndexOwners. It costs what
// the owner controls, not the namespace's size.
func ClaimCandidates(inf *informer.Informer, owner metav1.Object) Candidates {
	return Candidates{
		Controlled: inf.ByIndex(informer.IndexControllerUID, string(owner.GetUID())),
		Orphans:    inf.ByIndex(IndexOrphans, owner.GetNamespace()),
	}
}

// Filter keeps the candidates keep accepts.
func (c Candidates) Filter(keep func(runtime.Object) bool) Candidates {
	return Candidates{Controlled: slices.DeleteFunc(c.Controlled, not(keep)), Orphans: slices.DeleteFunc(c.Orphans, not(keep))}
}

func not(f func(runtime.Object) bool) func(runtime.Object) bool {
	return func(o runtime.Object) bool { return !f(o) }
}

// Enqueue adds obj's namespace/name key.
func (q *Queue) Enqueue(obj runtime.Object) { q.Add(KeyOf(Meta(obj))) }

// OnChange is an informer handler that calls f with the object on add, update and delete.
func OnChange(f func(obj runtime.Object)) informer.Funcs {
	return informer.Funcs{Add: f, Update: func(_, obj runtime.Object) { f(obj) }, Delete: f}
}

// ForEach returns a func that calls f with every object in inf's cache (a Resync).
func ForEach(inf *informer.Informer, f func(obj runtime.Object)) func() {
	return func() {
		for _, o := range inf.List(nil) {
			f(o)
		}
	}
}

// Owner resolves a controller reference of the given kind to the object in inf's cache, if it
// is there with the same UID (a deleted and recreated owner is another owner).
func Owner[T metav1.Object](inf *informer.Informer, namespace string, ref *metav1.OwnerReference, kind string) (T, bool) {
	var zero T
	if ref == nil || ref.Kind != kind {
		return zero, false
	}
	o, ok := inf.Get(namespace, ref.Name)
	if !ok {
		return zero, false
	}
	t, ok := o.(T)
	if !ok || t.GetUID() != ref.UID {
		return zero, false
	}
	return t, true
}

// Selecting returns the objects of namespace in inf's cache whose non-empty selector matches
// set: who might adopt an orphan.
func Selecting[T runtime.Object](inf *informer.Informer, namespace string, set labels.Set, selector func(T) *metav1.LabelSelector) []T {
	var out []T
	for _, o := range inf.ByIndex(informer.IndexNamespace, namespace) {
		t := o.(T)
		sel, err := metav1.LabelSelectorAsSelector(selector(t))
		if err == nil && !sel.Empty() && sel.Matches(set) {
			out = append(out, t)
		}
	}
	return out
}
