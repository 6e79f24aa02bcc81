package job

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// burstPods caps the creates of one sync, as kube-controller-manager does.
const burstPods = 500

// completionIndexEnv is the variable each container of an Indexed Job's pod reads its index from.
const completionIndexEnv = "JOB_COMPLETION_INDEX"

// manage creates or deletes pods so that as many run as the Job still needs, at most
// parallelism; it returns how long the failure backoff still holds new pods back.
func (c *controller) manage(ctx context.Context, jc *jobCtx) (time.Duration, error) {
	job := jc.job
	parallelism := int(*job.Spec.Parallelism)
	active := len(jc.active)
	if *job.Spec.PodReplacementPolicy == batchv1.Failed {
		active += int(jc.terminating) // a terminating pod is replaced only once it has failed
	}
	var want int
	switch {
	case job.Spec.Completions != nil:
		want = min(parallelism, int(*job.Spec.Completions-jc.succeeded()))
	case jc.succeeded() > 0:
		want = 0 // a work-queue Job: once one pod succeeded, the rest finish on their own
	default:
		want = parallelism
	}
	want = max(want, 0)
	var excess []*corev1.Pod
	var indexes []int
	if isIndexed(job) {
		excess, indexes = jc.planIndexes(want, active)
	} else if active > want {
		excess = podsToDelete(jc.active, active-want)
	}
	if len(excess) > 0 {
		return 0, c.deletePods(ctx, jc, excess)
	}
	n := want - active
	if n <= 0 {
		return 0, nil
	}
	if left := c.backoffLeft(jc.key, jc.now); left > 0 {
		return left, nil
	}
	return 0, c.createPods(ctx, jc, min(n, burstPods), indexes)
}

// planIndexes returns the active pods an Indexed Job must delete (a second pod of an index,
// an index out of range or already done, pods over parallelism) and the indexes to start.
func (jc *jobCtx) planIndexes(want, active int) ([]*corev1.Pod, []int) {
	n := int(completions(jc.job))
	held := sets.New[int]()
	var excess []*corev1.Pod
	for _, p := range jc.pods {
		ix := completionIndex(p)
		isActive := p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
		switch {
		case isActive && (ix < 0 || ix >= n || held.Has(ix) || jc.completed.Has(ix)):
			excess = append(excess, p)
		case isActive, p.DeletionTimestamp != nil && *jc.job.Spec.PodReplacementPolicy == batchv1.Failed && p.Status.Phase != corev1.PodFailed:
			held.Insert(ix)
		}
	}
	if len(excess) == 0 && active > want {
		sorted := append([]*corev1.Pod(nil), jc.active...)
		sort.Slice(sorted, func(i, j int) bool { return completionIndex(sorted[i]) > completionIndex(sorted[j]) })
		excess = sorted[:active-want]
	}
	var start []int
	for ix := 0; ix < n && len(start) < want-active; ix++ {
		if !held.Has(ix) && !jc.completed.Has(ix) {
			start = append(start, ix)
		}
	}
	return excess, start
}

// podsToDelete picks the pods whose loss costs least: unscheduled, then not ready, then newest.
func podsToDelete(pods []*corev1.Pod, n int) []*corev1.Pod {
	ps := append([]*corev1.Pod(nil), pods...)
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
			return a.Spec.NodeName == ""
		}
		if ra, rb := controllerkit.IsPodReady(a), controllerkit.IsPodReady(b); ra != rb {
			return !ra
		}
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	})
	return ps[:min(n, len(ps))]
}

func (c *controller) createPods(ctx context.Context, jc *jobCtx, n int, indexes []int) error {
	if isIndexed(jc.job) {
		n = min(n, len(indexes))
	}
	c.exp.ExpectCreations(jc.key, n)
	var mu sync.Mutex
	next := 0
	_, attempted, err := controllerkit.SlowStartBatch(n, 1, func() error {
		mu.Lock()
		ix := -1
		if isIndexed(jc.job) {
			ix, next = indexes[next], next+1
		}
		mu.Unlock()
		err := c.podCtl.Create(ctx, jc.job, newPod(jc.job, ix))
		if err != nil {
			c.exp.CreationObserved(jc.key) // a failed create will never be seen
		}
		return err
	})
	for i := attempted; i < n; i++ {
		c.exp.CreationObserved(jc.key)
	}
	return err
}

// newPod is a pod of the Job's template with the tracking finalizer; in an Indexed Job it
// carries its index (annotation, label, JOB_COMPLETION_INDEX) and the hostname <job>-<index>.
func newPod(job *batchv1.Job, ix int) *corev1.Pod {
	p := controllerkit.PodFromTemplate(job, gvk, &job.Spec.Template)
	p.Finalizers = append(p.Finalizers, batchv1.JobTrackingFinalizer)
	if ix < 0 {
		return p
	}
	s := strconv.Itoa(ix)
	p.GenerateName = fmt.Sprintf("%s-%d-", job.Name, ix)
	p.Annotations[batchv1.JobCompletionIndexAnnotation] = s
	p.Labels[batchv1.JobCompletionIndexAnnotation] = s
	if p.Spec.Hostname == "" {
		p.Spec.Hostname = fmt.Sprintf("%s-%d", job.Name, ix)
	}
	env := corev1.EnvVar{Name: completionIndexEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		APIVersion: "v1", FieldPath: fmt.Sprintf("metadata.annotations['%s']", batchv1.JobCompletionIndexAnnotation)}}}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			if !hasEnv(cs[i].Env, completionIndexEnv) {
				cs[i].Env = append(cs[i].Env, env)
			}
		}
	}
	return p
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// deletePods deletes pods (their finalizers keep them until their outcome is recorded).
func (c *controller) deletePods(ctx context.Context, jc *jobCtx, pods []*corev1.Pod) error {
	if len(pods) == 0 {
		return nil
	}
	keys := make([]string, len(pods))
	for i, p := range pods {
		keys[i] = controllerkit.KeyOf(p)
	}
	c.exp.ExpectDeletions(jc.key, keys)
	var wg sync.WaitGroup
	errs := make([]error, len(pods))
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = c.podCtl.Delete(ctx, jc.job, p); errs[i] != nil {
				c.exp.DeletionObserved(jc.key, keys[i])
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func isIndexed(job *batchv1.Job) bool {
	return job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion
}

func completions(job *batchv1.Job) int32 {
	if job.Spec.Completions == nil {
		return 0
	}
	return *job.Spec.Completions
}

// completionIndex reads a pod's index from its annotation (-1 when missing or invalid).
func completionIndex(p *corev1.Pod) int {
	v, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		return -1
	}
	ix, err := strconv.Atoi(v)
	if err != nil || ix < 0 {
		return -1
	}
	return ix
}

// indexSet is a set of completion indexes, written as Kubernetes writes completedIndexes:
// ascending, runs as ranges ("1,3-5").
type indexSet struct{ sets.Set[int] }

func parseIndexes(s string, limit int) indexSet {
	out := indexSet{sets.New[int]()}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for i := a; i <= b && i < limit; i++ {
			out.Insert(i)
		}
	}
	return out
}

func (s indexSet) String() string {
	ixs := sets.List(s.Set)
	var parts []string
	for i := 0; i < len(ixs); {
		j := i
		for j+1 < len(ixs) && ixs[j+1] == ixs[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(ixs[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ixs[i], ixs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
