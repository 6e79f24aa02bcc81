package daemonset

import (
	"context"
	"errors"
	"sort"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// plan is what one sync decided: pods to create (by node) and pods to delete.
type plan struct {
	create []string
	delete []*corev1.Pod
}

// nodeState is one eligible node's daemon pods, split by template version.
type nodeState struct {
	node     string
	cur, old []*corev1.Pod
}

func (c *controller) sync(ctx context.Context, key string) error {
	ds, sel, ok := controllerkit.Workload(c.dss, c.exp, key, func(ds *appsv1.DaemonSet) *metav1.LabelSelector { return ds.Spec.Selector })
	if !ok {
		return nil
	}
	satisfied := c.exp.Satisfied(key)
	hash := templateHash(&ds.Spec.Template, ds.Status.CollisionCount)
	var finished []*corev1.Pod
	candidates := controllerkit.ClaimCandidates(c.pods, ds).Filter(func(o runtime.Object) bool {
		p := o.(*corev1.Pod)
		switch {
		case p.DeletionTimestamp != nil:
			return false
		case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
			if controllerkit.IsOwnedBy(p, ds) {
				finished = append(finished, p) // a daemon must keep running: replace it
			}
			return false
		}
		return true
	})
	claimed, claimErr := controllerkit.Claim(ctx, c.client, ds, gvk, sel, candidates, true)
	byNode := map[string][]*corev1.Pod{}
	for _, p := range controllerkit.Pods(claimed) {
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	probe := c.newPod(ds, hash, "")
	var eligible []nodeState
	p := plan{delete: finished}
	misscheduled := 0
	for _, o := range c.nodes.List(nil) {
		node := o.(*corev1.Node)
		pods := byNode[node.Name]
		delete(byNode, node.Name)
		if !shouldRun(probe, node) {
			p.delete = append(p.delete, pods...)
			if len(pods) > 0 {
				misscheduled++
			}
			continue
		}
		st := nodeState{node: node.Name}
		for _, pod := range pods {
			if pod.Labels[HashLabel] == hash {
				st.cur = append(st.cur, pod)
			} else {
				st.old = append(st.old, pod)
			}
		}
		sortOldestFirst(st.cur)
		if len(st.cur) > 1 {
			p.delete = append(p.delete, st.cur[1:]...)
			st.cur = st.cur[:1]
		}
		if len(st.cur)+len(st.old) == 0 {
			p.create = append(p.create, node.Name)
		}
		eligible = append(eligible, st)
	}
	for _, pods := range byNode { // on nodes that are gone, or not bound at all
		p.delete = append(p.delete, pods...)
	}
	c.rollingUpdate(ds, eligible, &p)
	var manageErr error
	if satisfied && ds.DeletionTimestamp == nil {
		manageErr = c.apply(ctx, ds, key, hash, p)
	}
	return errors.Join(claimErr, manageErr, c.updateStatus(ctx, ds, key, eligible, misscheduled))
}

func sortOldestFirst(ps []*corev1.Pod) {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].CreationTimestamp.Before(&ps[j].CreationTimestamp) })
}

func (c *controller) newPod(ds *appsv1.DaemonSet, hash, node string) *corev1.Pod {
	pod := controllerkit.PodFromTemplate(ds, gvk, &ds.Spec.Template)
	pod.Labels[HashLabel] = hash
	pod.Spec.NodeName = node
	pod.Spec.Tolerations = withDaemonTolerations(pod.Spec.Tolerations)
	return pod
}

func available(p *corev1.Pod, ds *appsv1.DaemonSet, c *controller) bool {
	return controllerkit.IsPodAvailable(p, ds.Spec.MinReadySeconds, c.now())
}

// rollingUpdate replaces old pods within maxUnavailable (deleting first) or, with maxSurge,
// starts the new pod beside the old one and deletes the old one once the new one is available.
func (c *controller) rollingUpdate(ds *appsv1.DaemonSet, nodes []nodeState, p *plan) {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
		for _, st := range nodes {
			if len(st.old) > 1 {
				p.delete = append(p.delete, st.old[1:]...)
			}
		}
		return
	}
	one := intstr.FromInt32(1)
	zero := intstr.FromInt32(0)
	var mu, ms *intstr.IntOrString
	if ru != nil {
		mu, ms = ru.MaxUnavailable, ru.MaxSurge
	}
	maxUnavailable, _ := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(mu, one), len(nodes), true)
	maxSurge, _ := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(ms, zero), len(nodes), true)
	if maxSurge == 0 && maxUnavailable == 0 {
		maxUnavailable = 1
	}
	unavailable := 0
	for _, st := range nodes {
		ok := false
		for _, pod := range append(append([]*corev1.Pod(nil), st.cur...), st.old...) {
			ok = ok || available(pod, ds, c)
		}
		if !ok {
			unavailable++
		}
	}
	surged := 0
	for _, st := range nodes {
		if len(st.old) == 0 {
			continue
		}
		if len(st.cur) > 0 {
			surged++
			if available(st.cur[0], ds, c) { // the new pod took over
				p.delete = append(p.delete, st.old...)
			}
			continue
		}
		oldAvailable := false
		for _, pod := range st.old {
			oldAvailable = oldAvailable || available(pod, ds, c)
		}
		switch {
		case !oldAvailable: // replacing it costs no availability
			p.delete = append(p.delete, st.old...)
		case maxSurge > 0 && surged < maxSurge:
			surged++
			p.create = append(p.create, st.node)
		case maxSurge == 0 && unavailable < maxUnavailable:
			unavailable++
			p.delete = append(p.delete, st.old...)
		}
	}
}

// apply carries a plan out under expectations.
func (c *controller) apply(ctx context.Context, ds *appsv1.DaemonSet, key, hash string, p plan) error {
	var errs []error
	var mu sync.Mutex
	if len(p.create) > 0 {
		c.exp.ExpectCreations(key, len(p.create))
		next := 0
		_, attempted, err := controllerkit.SlowStartBatch(len(p.create), 1, func() error {
			mu.Lock()
			node := p.create[next]
			next++
			mu.Unlock()
			err := c.podCtl.Create(ctx, ds, c.newPod(ds, hash, node))
			if err != nil {
				c.exp.CreationObserved(key)
			}
			return err
		})
		for i := attempted; i < len(p.create); i++ {
			c.exp.CreationObserved(key)
		}
		errs = append(errs, err)
	}
	if len(p.delete) > 0 {
		keys := make([]string, len(p.delete))
		for i, pod := range p.delete {
			keys[i] = controllerkit.KeyOf(pod)
		}
		c.exp.ExpectDeletions(key, keys)
		var wg sync.WaitGroup
		for i, pod := range p.delete {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.podCtl.Delete(ctx, ds, pod); err != nil {
					c.exp.DeletionObserved(key, keys[i])
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	return errors.Join(errs...)
}

func (c *controller) updateStatus(ctx context.Context, ds *appsv1.DaemonSet, key string, nodes []nodeState, misscheduled int) error {
	st := appsv1.DaemonSetStatus{
		DesiredNumberScheduled: int32(len(nodes)),
		NumberMisscheduled:     int32(misscheduled),
		ObservedGeneration:     ds.Status.ObservedGeneration,
		CollisionCount:         ds.Status.CollisionCount,
		Conditions:             ds.Status.Conditions,
	}
	if c.exp.Satisfied(key) {
		st.ObservedGeneration = ds.Generation
	}
	for _, n := range nodes {
		pods := append(append([]*corev1.Pod(nil), n.cur...), n.old...)
		if len(pods) == 0 {
			continue
		}
		st.CurrentNumberScheduled++
		if len(n.cur) > 0 {
			st.UpdatedNumberScheduled++
		}
		ready, avail := false, false
		for _, p := range pods {
			ready = ready || controllerkit.IsPodReady(p)
			avail = avail || available(p, ds, c)
		}
		if ready {
			st.NumberReady++
		}
		if avail {
			st.NumberAvailable++
		}
	}
	st.NumberUnavailable = st.DesiredNumberScheduled - st.NumberAvailable
	if apiequality.Semantic.DeepEqual(st, ds.Status) {
		return nil
	}
	next := ds.DeepCopy()
	next.Status = st
	_, err := c.client.UpdateStatus(ctx, next)
	return err
}
