package disruption_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/disruption"
	"github.com/skiff-sh/skiff/actors/controllers/replicaset"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/simnode"
)

// setup runs a ReplicaSet of n ready pods on simulated nodes with the disruption controller.
func setup(t *testing.T, n int32) (*controlplane.ControlPlane, context.Context) {
	cp := ct.Start(t)
	cfg := controllerkit.Config{Informers: cp.Informers, Client: cp.Client}
	ct.Spawn(t, cp, "replicaset", replicaset.New(cfg))
	ct.Spawn(t, cp, "disruption", disruption.New(cfg))
	ct.Spawn(t, cp, "simnode", simnode.New(simnode.Config{Log: cp.Log, Client: cp.Client, Nodes: 2}))
	ct.Binder(t, cp)
	ctx := ct.Ctx(t)
	if _, err := cp.Client.Create(ctx, ct.ReplicaSet("web", "web", n)); err != nil {
		t.Fatal(err)
	}
	ct.Wait(t, func() error {
		if got := ct.CountReady(ct.Active(ct.ListPods(t, cp, "default", "app=web"))); got != int(n) {
			return ct.Errorf("%d ready pods", got)
		}
		return nil
	})
	return cp, ctx
}

func pdb(name string, minAvailable, maxUnavailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: minAvailable, MaxUnavailable: maxUnavailable,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
}

// waitStatus waits for the PDB's status to be the wanted numbers for its current generation.
func waitStatus(t *testing.T, cp *controlplane.ControlPlane, name string, expected, desired, healthy, allowed int32) *policyv1.PodDisruptionBudget {
	t.Helper()
	var p *policyv1.PodDisruptionBudget
	ct.Wait(t, func() error {
		p = ct.Get[*policyv1.PodDisruptionBudget](t, cp, "policy", "poddisruptionbudgets", "default", name)
		s := p.Status
		if s.ObservedGeneration != p.Generation || s.ExpectedPods != expected || s.DesiredHealthy != desired || s.CurrentHealthy != healthy || s.DisruptionsAllowed != allowed {
			return ct.Errorf("status %+v at generation %d; want expected %d desired %d healthy %d allowed %d", s, p.Generation, expected, desired, healthy, allowed)
		}
		return nil
	})
	return p
}

func condition(p *policyv1.PodDisruptionBudget) *metav1.Condition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == policyv1.DisruptionAllowedCondition {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func TestStatusNumbers(t *testing.T) {
	cp, ctx := setup(t, 3)
	if _, err := cp.Client.Create(ctx, pdb("web", ptr.To(intstr.FromInt32(2)), nil)); err != nil {
		t.Fatal(err)
	}
	p := waitStatus(t, cp, "web", 3, 2, 3, 1)
	if c := condition(p); c == nil || c.Status != metav1.ConditionTrue || c.Reason != policyv1.SufficientPodsReason {
		t.Fatalf("condition %+v, want DisruptionAllowed True/SufficientPods", c)
	}
	// maxUnavailable as a percentage scales from the ReplicaSet's replicas, rounded up: 34% of 3 is 2.
	p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, ptr.To(intstr.FromString("34%"))
	if _, err := cp.Client.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cp, "web", 3, 1, 3, 2)
	// minAvailable equal to the replicas allows nothing.
	p = ct.Get[*policyv1.PodDisruptionBudget](t, cp, "policy", "poddisruptionbudgets", "default", "web")
	p.Spec.MinAvailable, p.Spec.MaxUnavailable = ptr.To(intstr.FromString("100%")), nil
	if _, err := cp.Client.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	p = waitStatus(t, cp, "web", 3, 3, 3, 0)
	if c := condition(p); c == nil || c.Status != metav1.ConditionFalse || c.Reason != policyv1.InsufficientPodsReason {
		t.Fatalf("condition %+v, want DisruptionAllowed False/InsufficientPods", c)
	}
}

func TestEvictionTakesTheLastDisruptionOnce(t *testing.T) {
	cp, ctx := setup(t, 3)
	if _, err := cp.Client.Create(ctx, pdb("web", ptr.To(intstr.FromInt32(2)), nil)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cp, "web", 3, 2, 3, 1)
	pods := ct.Active(ct.ListPods(t, cp, "default", "app=web"))
	// Two evictions race for the one disruption allowed: exactly one wins.
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = cp.Client.Evict(ctx, "default", pods[i].Name, nil) }()
	}
	wg.Wait()
	won, refused := -1, 0
	for i, err := range errs {
		switch {
		case err == nil:
			won = i
		case apierrors.IsTooManyRequests(err) && strings.Contains(err.Error(), "Cannot evict pod as it would violate the pod's disruption budget."):
			refused++
		default:
			t.Fatalf("eviction %d: %v", i, err)
		}
	}
	if won < 0 || refused != 1 {
		t.Fatalf("want one eviction to succeed and one 429, got %v", errs)
	}
	if evicted, err := ct.TryGet[*corev1.Pod](cp, "", "pods", "default", pods[won].Name); err == nil && evicted.DeletionTimestamp == nil {
		t.Fatalf("evicted pod %s is not being deleted", evicted.Name)
	}
	if loser, err := ct.TryGet[*corev1.Pod](cp, "", "pods", "default", pods[1-won].Name); err != nil || loser.DeletionTimestamp != nil || hasDisruptionTarget(loser) {
		t.Fatalf("refused eviction touched its pod: %v", err)
	}
	// The ReplicaSet replaces the pod; once it is ready the budget allows one again.
	waitStatus(t, cp, "web", 3, 2, 3, 1)
}

func TestEvictionOfUnprotectedAndPendingPods(t *testing.T) {
	cp, ctx := setup(t, 2)
	full := pdb("web", ptr.To(intstr.FromString("100%")), nil)
	pend := pdb("pend", ptr.To(intstr.FromInt32(1)), nil)
	pend.Spec.Selector.MatchLabels = map[string]string{"app": "pend"}
	for _, p := range []*policyv1.PodDisruptionBudget{full, pend} {
		if _, err := cp.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	waitStatus(t, cp, "web", 2, 2, 2, 0)
	// A pod no budget selects is evicted freely; so is a pending one (its node never runs it)
	// although its budget allows no disruption.
	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "free", Namespace: "default", Labels: map[string]string{"app": "other"}}, Spec: ct.Template("x", "img").Spec},
		{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "default", Labels: map[string]string{"app": "pend"}},
			Spec: func() corev1.PodSpec { s := ct.Template("x", "img").Spec; s.NodeName = "nowhere"; return s }()},
	} {
		if _, err := cp.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if p.Name == "pending" {
			waitStatus(t, cp, "pend", 1, 1, 0, 0)
		}
		if err := cp.Client.Evict(ctx, "default", p.Name, nil); err != nil {
			t.Fatalf("evict %s: %v", p.Name, err)
		}
		got, err := ct.TryGet[*corev1.Pod](cp, "", "pods", "default", p.Name)
		if err == nil && got.DeletionTimestamp == nil {
			t.Fatalf("evicted pod %s is not being deleted", p.Name)
		}
	}
	// A running pod under a full budget: 429, with the budget's numbers as the cause; a dry
	// run is refused the same way.
	victim := ct.Active(ct.ListPods(t, cp, "default", "app=web"))[0]
	for _, opts := range []*metav1.DeleteOptions{nil, {DryRun: []string{metav1.DryRunAll}}} {
		err := cp.Client.Evict(ctx, "default", victim.Name, opts)
		if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "disruption budget") {
			t.Fatalf("eviction against a full budget (%+v): %v, want 429", opts, err)
		}
	}
	var st *apierrors.StatusError
	if err := cp.Client.Evict(ctx, "default", victim.Name, nil); !errors.As(err, &st) || st.ErrStatus.Details == nil ||
		len(st.ErrStatus.Details.Causes) != 1 || st.ErrStatus.Details.Causes[0].Message != "The disruption budget web needs 2 healthy pods and has 2 currently" {
		t.Fatalf("429 causes: %+v", err)
	}
	if err := cp.Client.Delete(ctx, controllerkit.MustKind("policy", "poddisruptionbudgets"), "default", "web", nil); err != nil {
		t.Fatal(err)
	}
	// Unprotected now: a dry run changes nothing, a stale UID precondition is a conflict.
	if err := cp.Client.Evict(ctx, "default", victim.Name, &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("dry-run eviction: %v", err)
	}
	if p := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", victim.Name); p.DeletionTimestamp != nil || hasDisruptionTarget(p) {
		t.Fatal("dry-run eviction changed the pod")
	}
	if err := cp.Client.Evict(ctx, "default", victim.Name, &metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions("not-it")}); !apierrors.IsConflict(err) {
		t.Fatalf("eviction with a wrong UID precondition: %v, want 409", err)
	}
	// The delete options are the pod's (a finalizer keeps it readable once its node let it go).
	held := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", victim.Name)
	held.Finalizers = append(held.Finalizers, "test.skiff.sh/hold")
	if _, err := cp.Client.Update(ctx, held); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Evict(ctx, "default", victim.Name, &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](7)}); err != nil {
		t.Fatal(err)
	}
	p := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", victim.Name)
	if p.DeletionTimestamp == nil || ptr.Deref(p.DeletionGracePeriodSeconds, 0) != 7 || !hasDisruptionTarget(p) {
		t.Fatalf("evicted pod: deletion %v grace %v conditions %+v", p.DeletionTimestamp, p.DeletionGracePeriodSeconds, p.Status.Conditions)
	}
}

func hasDisruptionTarget(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "EvictionByEvictionAPI" {
			return true
		}
	}
	return false
}

func TestInvalidBudgetsAreRefused(t *testing.T) {
	cp := ct.Start(t)
	ctx := ct.Ctx(t)
	for _, c := range []struct {
		pdb  *policyv1.PodDisruptionBudget
		want string
	}{
		{pdb("both", ptr.To(intstr.FromInt32(1)), ptr.To(intstr.FromInt32(1))), "spec: Invalid value"},
		{pdb("over", ptr.To(intstr.FromString("101%")), nil), "spec.minAvailable"},
		{pdb("neg", nil, ptr.To(intstr.FromInt32(-1))), "spec.maxUnavailable"},
	} {
		_, err := cp.Client.Create(ctx, c.pdb)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v, want 422 naming %s", c.pdb.Name, err, c.want)
		}
		if _, err := ct.TryGet[*policyv1.PodDisruptionBudget](cp, "policy", "poddisruptionbudgets", "default", c.pdb.Name); !apierrors.IsNotFound(err) {
			t.Fatalf("%s was written: %v", c.pdb.Name, err)
		}
	}
}
