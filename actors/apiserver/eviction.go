package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// maxDisruptedPods bounds status.disruptedPods, as kube-apiserver does: past it, evictions
// approved but not yet seen by the disruption controller are too many to approve another.
const maxDisruptedPods = 2000

// evictionVersions are the Eviction bodies accepted, as kube-apiserver accepts both.
var evictionVersions = sets.New("policy/v1", "policy/v1beta1")

var pdbResource = schema.GroupResource{Group: "policy", Resource: "poddisruptionbudget"}

// evict serves pods/eviction, as kube-apiserver's eviction REST does: a pod that is pending,
// finished or already being deleted goes at once; otherwise the one PodDisruptionBudget that
// selects it must allow a disruption, which is taken by a compare-and-swap write of the PDB's
// status (disruptionsAllowed-1 and the pod in disruptedPods) before the pod is deleted, so two
// evictions can never both take the budget's last disruption.
func (s *Server) evict(ctx context.Context, k *schemas.Kind, ns, name string, body []byte, wo writeOptions) (runtime.Object, error) {
	var ev policyv1.Eviction
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, badRequest("Eviction: %v", err)
	}
	if ev.APIVersion != "" && !evictionVersions.Has(ev.APIVersion) {
		return nil, badRequest("Eviction: apiVersion %q is not supported (policy/v1, policy/v1beta1)", ev.APIVersion)
	}
	if ev.Name != name {
		return nil, badRequest("name in URL does not match name in Eviction object")
	}
	opts, err := evictionDeleteOptions(&ev, wo)
	if err != nil {
		return nil, err
	}
	if len(opts.DryRun) > 0 {
		wo.dryRun = true
	}
	pod, done, err := s.evictIfFree(ctx, k, ns, name, opts, wo)
	if err != nil || done != nil {
		return done, err
	}
	pdbs, err := s.pdbsFor(ctx, pod)
	if err != nil {
		return nil, err
	}
	switch {
	case len(pdbs) > 1:
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError,
			Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}}
	case len(pdbs) == 0:
		return s.evictPod(ctx, k, pod, opts, wo)
	}
	pdb := pdbs[0]
	if !isPodReady(pod) && unhealthyMayGo(pdb) {
		// An unready pod costs the budget nothing; the revision pin makes sure it is still
		// unready, and a pod changed meanwhile is a 429 to retry, as in Kubernetes.
		obj, err := s.evictPod(ctx, k, pod, withRV(opts, pod.ResourceVersion), wo)
		if apierrors.IsConflict(err) && rvUnset(opts) {
			return nil, stillProcessing(pdb.Name)
		}
		return obj, err
	}
	if err := s.takeDisruption(ctx, pdb, pod.Name, wo); err != nil {
		return nil, err
	}
	return s.evictPod(ctx, k, pod, opts, wo)
}

// evictIfFree evicts the pod at once when no budget needs asking (canIgnorePDB); otherwise it
// returns the pod read. A pending pod's delete is pinned to the revision read, so one turning
// ready meanwhile is not taken unchecked; such a conflict re-reads and tries again unless the
// client pinned a revision itself, as in Kubernetes.
func (s *Server) evictIfFree(ctx context.Context, k *schemas.Kind, ns, name string, opts *metav1.DeleteOptions, wo writeOptions) (*corev1.Pod, runtime.Object, error) {
	for attempt := 0; ; attempt++ {
		cur, err := s.get(ctx, k, ns, name)
		if err != nil {
			return nil, nil, err
		}
		pod := cur.(*corev1.Pod)
		if !canIgnorePDB(pod) {
			return pod, nil, nil
		}
		o := opts
		if rvUnset(opts) && pod.Status.Phase == corev1.PodPending && pod.DeletionTimestamp == nil {
			o = withRV(opts, pod.ResourceVersion)
		}
		done, err := s.evictPod(ctx, k, pod, o, wo)
		if apierrors.IsConflict(err) && rvUnset(opts) && attempt < maxConflictRetries {
			continue
		}
		return nil, done, err
	}
}

func evictionDeleteOptions(ev *policyv1.Eviction, wo writeOptions) (*metav1.DeleteOptions, error) {
	var query []string
	if wo.dryRun {
		query = []string{metav1.DryRunAll}
	}
	opts := ev.DeleteOptions
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	switch {
	case len(opts.DryRun) == 0:
		opts.DryRun = query
	case len(query) > 0 && !reflect.DeepEqual(query, opts.DryRun):
		return nil, badRequest("Non-matching dry-run options in request and content: %v and %v", query, opts.DryRun)
	}
	for _, d := range opts.DryRun {
		if d != metav1.DryRunAll {
			return nil, badRequest("deleteOptions.dryRun: Unsupported value: %q: supported values: \"All\"", d)
		}
	}
	return opts, nil
}

// canIgnorePDB: a pod that is pending, finished or already terminating causes no new disruption.
func canIgnorePDB(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed ||
		p.Status.Phase == corev1.PodPending || p.DeletionTimestamp != nil
}

func isPodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// unhealthyMayGo: an unready pod may be evicted without taking a disruption when the budget
// says AlwaysAllow, or when it is met anyway (IfHealthyBudget, the default).
func unhealthyMayGo(pdb *policyv1.PodDisruptionBudget) bool {
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
		return true
	}
	return pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0
}

func rvUnset(o *metav1.DeleteOptions) bool {
	return o.Preconditions == nil || o.Preconditions.ResourceVersion == nil
}

func withRV(o *metav1.DeleteOptions, rv string) *metav1.DeleteOptions {
	o = o.DeepCopy()
	if o.Preconditions == nil {
		o.Preconditions = &metav1.Preconditions{}
	}
	o.Preconditions.ResourceVersion = &rv
	return o
}

// pdbsFor returns the namespace's PDBs that select the pod. As in kube-apiserver, a PDB with an
// empty selector selects nothing here.
func (s *Server) pdbsFor(ctx context.Context, pod *corev1.Pod) ([]*policyv1.PodDisruptionBudget, error) {
	k, _ := schemas.ByResource("policy", "v1", "poddisruptionbudgets")
	entries, _, err := s.log.List(ctx, schemas.StoragePrefix(k, pod.Namespace), statelog.ReadOptions{})
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var out []*policyv1.PodDisruptionBudget
	for _, e := range entries {
		obj, err := decodeStored(k, e.Value, e.Rev)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		pdb := obj.(*policyv1.PodDisruptionBudget)
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, pdb)
	}
	return out, nil
}

// takeDisruption decrements the PDB's disruptionsAllowed and records the pod in disruptedPods,
// a compare-and-swap on the PDB's revision: a lost race re-reads the PDB and checks again.
func (s *Server) takeDisruption(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pod string, wo writeOptions) error {
	k, _ := schemas.ByResource("policy", "v1", "poddisruptionbudgets")
	_, err := s.guaranteedUpdate(ctx, k, pdb.Namespace, pdb.Name, "status", "update", wo, edited(func(cur runtime.Object) (runtime.Object, error) {
		p := cur.(*policyv1.PodDisruptionBudget)
		p.ResourceVersion = "" // unpinned: a lost race retries on the latest copy
		if err := checkDisruption(p); err != nil {
			return nil, err
		}
		p.Status.DisruptionsAllowed--
		if p.Status.DisruptionsAllowed == 0 {
			pdbhelper.UpdateDisruptionAllowedCondition(p)
		}
		if p.Status.DisruptedPods == nil {
			p.Status.DisruptedPods = map[string]metav1.Time{}
		}
		p.Status.DisruptedPods[pod] = metav1.NewTime(s.now().UTC().Truncate(time.Second))
		return p, nil
	}))
	return err
}

func checkDisruption(p *policyv1.PodDisruptionBudget) error {
	switch {
	case p.Status.ObservedGeneration < p.Generation:
		return stillProcessing(p.Name)
	case p.Status.DisruptionsAllowed < 0:
		return apierrors.NewForbidden(pdbResource, p.Name, errors.New("pdb disruptions allowed is negative"))
	case len(p.Status.DisruptedPods) > maxDisruptedPods:
		return apierrors.NewForbidden(pdbResource, p.Name, errors.New("DisruptedPods map too big - too many evictions not confirmed by PDB controller"))
	case p.Status.DisruptionsAllowed == 0:
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause,
			Message: fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", p.Name, p.Status.DesiredHealthy, p.Status.CurrentHealthy)})
		return err
	}
	return nil
}

// stillProcessing is the 429 for a budget whose status is behind its spec.
func stillProcessing(pdb string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause,
		Message: fmt.Sprintf("The disruption budget %s is still being processed by the server.", pdb)})
	return err
}

// evictPod marks the pod with the DisruptionTarget condition, as Kubernetes does, then deletes
// it with the eviction's options. The condition write honours the options' preconditions, and
// a revision precondition moves on to the revision that write made.
func (s *Server) evictPod(ctx context.Context, k *schemas.Kind, pod *corev1.Pod, opts *metav1.DeleteOptions, wo writeOptions) (runtime.Object, error) {
	done := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: 201}
	if !wo.dryRun {
		obj, err := s.guaranteedUpdate(ctx, k, pod.Namespace, pod.Name, "status", "update", wo, edited(func(cur runtime.Object) (runtime.Object, error) {
			p := cur.(*corev1.Pod)
			if err := checkPreconditions(k, p, opts.Preconditions); err != nil {
				return nil, err
			}
			p.ResourceVersion = ""
			setPodCondition(&p.Status, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting", LastTransitionTime: metav1.NewTime(s.now().UTC())})
			return p, nil
		}))
		if err != nil {
			return nil, err
		}
		if !rvUnset(opts) {
			opts = withRV(opts, mustMeta(obj).GetResourceVersion())
		}
	}
	if _, err := s.deleteWith(ctx, k, pod.Namespace, pod.Name, opts, wo); err != nil {
		return nil, err
	}
	return done, nil
}

func checkPreconditions(k *schemas.Kind, p *corev1.Pod, pre *metav1.Preconditions) error {
	if pre == nil {
		return nil
	}
	if pre.UID != nil && *pre.UID != "" && *pre.UID != p.UID {
		return apierrors.NewConflict(groupResource(k), p.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *pre.UID, p.UID))
	}
	if pre.ResourceVersion != nil && *pre.ResourceVersion != "" && *pre.ResourceVersion != p.ResourceVersion {
		return apierrors.NewConflict(groupResource(k), p.Name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *pre.ResourceVersion, p.ResourceVersion))
	}
	return nil
}
