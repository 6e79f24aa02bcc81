package kubelet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"github.com/skiff-sh/skiff/internal/resolvconf"
)

// waitInfo is why a container is not running (shown as its waiting state).
type waitInfo struct{ reason, message string }

// syncKey closes the gap between one pod key and the runtime: a pod bound here runs, a pod
// being deleted is stopped and finished, anything else under that name is torn down.
func (k *kubelet) syncKey(ctx context.Context, key string) (syncOutcome, error) {
	ns, name := controllerkit.SplitKey(key)
	var pod *corev1.Pod
	if o, ok := k.pods.Get(ns, name); ok && o.(*corev1.Pod).Spec.NodeName == k.cfg.NodeName {
		pod = o.(*corev1.Pod)
	}
	all, err := k.rt.List(ctx)
	if err != nil {
		return syncOutcome{}, err
	}
	var cur *kruntime.SandboxStatus
	for i := range all {
		sb := &all[i]
		switch {
		case pod != nil && sb.PodUID == string(pod.UID):
			cur = sb
		case sb.PodNamespace == ns && sb.PodName == name:
			// The same name but not this pod (deleted, recreated, bound elsewhere): a leftover.
			if err := k.rt.StopSandbox(ctx, sb.PodUID); err != nil {
				return syncOutcome{}, err
			}
			k.forgetUID(types.UID(sb.PodUID))
		}
	}
	switch {
	case pod == nil:
		return syncOutcome{gone: true}, nil
	case pod.DeletionTimestamp != nil:
		return syncOutcome{}, k.terminate(ctx, pod, cur)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		// Finished and reported: nothing of it keeps running and its IP is released, but its
		// exited containers and their logs stay until the pod is deleted (kubectl logs job/x).
		if cur != nil && !cur.Finished {
			k.probes.retain(pod.UID, nil)
			return syncOutcome{}, k.rt.FinishSandbox(ctx, string(pod.UID))
		}
		return syncOutcome{}, nil
	}
	probes, err := k.run(ctx, pod, cur)
	return syncOutcome{probes: probes}, err
}

// run starts what the pod lacks and reports its status; it returns the probes its running
// containers want.
func (k *kubelet) run(ctx context.Context, pod *corev1.Pod, cur *kruntime.SandboxStatus) ([]probeSpec, error) {
	ctx = withObjectCache(ctx)
	sb, err := k.rt.RunSandbox(ctx, sandboxConfig(pod, k.podDNS(pod)))
	if err != nil {
		k.recorder.Eventf(ctx, pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
		return nil, err
	}
	ps := k.setupVolumes(ctx, pod, sb)
	if o, over := ps.vols.Overused(); over {
		return nil, k.evict(ctx, pod, sb, o)
	}
	attempts := byName(cur)
	blocker := k.initBlocker(pod, attempts)
	waiting := map[string]waitInfo{}
	var retry time.Duration
	cs, policies := podContainers(pod, blocker)
	for i, c := range cs {
		w, after, err := k.syncContainer(ctx, pod, ps, c, attempts[c.Name], policies[i])
		if err != nil {
			return nil, err
		}
		if w != nil {
			waiting[c.Name] = *w
		}
		if after > 0 && (retry == 0 || after < retry) {
			retry = after
		}
	}
	if cur, err = k.podRuntime(ctx, pod.UID); err != nil {
		return nil, err
	}
	attempts = byName(cur)
	if k.initBlocker(pod, attempts) > blocker {
		// A sidecar started (no exit event will come for it): the next container's turn.
		k.enqueue(controllerkit.KeyOf(pod), false)
	}
	running := map[string]bool{}
	var probes []probeSpec
	for _, c := range allContainers(pod) {
		if l := latest(attempts[c.Name]); l != nil && l.State == kruntime.StateRunning {
			running[l.ID] = true
			probes = append(probes, k.probes.ensure(pod, c, *l, sb.IP)...)
		}
	}
	k.probes.retain(pod.UID, running)
	if err := k.reportStatus(ctx, pod, sb, attempts, waiting); err != nil {
		return nil, err
	}
	if retry > 0 {
		k.enqueueAfter(controllerkit.KeyOf(pod), retry)
	}
	return probes, nil
}

// syncContainer starts, restarts or kills one container; it returns why the container waits
// (if it does) and when to look again.
func (k *kubelet) syncContainer(ctx context.Context, pod *corev1.Pod, ps *podSetup, c *corev1.Container, atts []kruntime.ContainerStatus, policy corev1.RestartPolicy) (*waitInfo, time.Duration, error) {
	l := latest(atts)
	switch {
	case l == nil:
		return k.start(ctx, pod, ps, c, 0)
	case l.State == kruntime.StateRunning:
		res := k.probes.result(l.ID, c)
		if !res.LiveFailed {
			return nil, 0, nil
		}
		k.recorder.Eventf(ctx, pod, corev1.EventTypeNormal, "Killing", "Container %s %s, will be restarted", c.Name, res.Why)
		if err := k.rt.KillContainer(ctx, l.ID, k.preStop(ctx, pod, c.Name, l.ID, terminationGrace(pod))); err != nil {
			return nil, 0, err
		}
		k.enqueue(controllerkit.KeyOf(pod), false) // the restart is the next sync's, under back-off
		return nil, 0, nil
	case l.State == kruntime.StateExited:
		if !wantsRestart(policy, l.ExitCode) {
			return nil, 0, nil
		}
		now := time.Now()
		wait, delay := k.backoff.wait(pod.UID, c.Name, l.StartedAt, l.FinishedAt, now)
		if wait > 0 {
			k.recorder.Eventf(ctx, pod, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s_%s(%s)", c.Name, pod.Name, pod.Namespace, pod.UID)
			return &waitInfo{"CrashLoopBackOff", fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, c.Name, pod.Name, pod.Namespace, pod.UID)}, wait, nil
		}
		// Only the latest attempt is kept (its exit is lastState; its log is --previous).
		for _, old := range atts[:len(atts)-1] {
			if err := k.rt.StopContainer(ctx, old.ID, 0); err != nil {
				return nil, 0, err
			}
		}
		w, after, err := k.start(ctx, pod, ps, c, l.Attempt+1)
		if err == nil && w == nil {
			k.backoff.restarted(pod.UID, c.Name)
		}
		return w, after, err
	case l.State == kruntime.StateCreated:
		// Made but never started (an agent crash mid-start): make this attempt again.
		if err := k.rt.StopContainer(ctx, l.ID, 0); err != nil {
			return nil, 0, err
		}
		return k.start(ctx, pod, ps, c, l.Attempt)
	default:
		return nil, time.Second, nil // containerd could not say: ask again soon
	}
}

func (k *kubelet) start(ctx context.Context, pod *corev1.Pod, ps *podSetup, c *corev1.Container, attempt int) (*waitInfo, time.Duration, error) {
	sb := ps.sb
	if ps.volsErr != nil { // the FailedMount event says why; the next sync tries again
		return &waitInfo{"ContainerCreating", ""}, k.cfg.BackoffBase, nil
	}
	env, vars, err := k.containerEnv(ctx, pod, c, sb.IP)
	if err != nil {
		k.recorder.Eventf(ctx, pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		return &waitInfo{"CreateContainerConfigError", err.Error()}, k.cfg.BackoffBase, nil
	}
	mounts, err := ps.vols.Mounts(c, func(s string) string { return expand(s, vars) })
	if err != nil {
		k.recorder.Eventf(ctx, pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		return &waitInfo{"CreateContainerConfigError", err.Error()}, k.cfg.BackoffBase, nil
	}
	term, err := k.terminationMount(sb, c, attempt)
	if err != nil {
		return nil, 0, err
	}
	mounts = append(mounts, term...)
	if w, err := k.ensureImage(ctx, pod, c); w != nil || err != nil {
		return w, k.cfg.BackoffBase, err
	}
	ctr, err := k.rt.StartContainer(ctx, sb, kruntime.ContainerConfig{
		Name: c.Name, Attempt: attempt, Image: c.Image,
		Command: expandAll(c.Command, vars), Args: expandAll(c.Args, vars), Env: env,
		WorkingDir: c.WorkingDir, Resources: c.Resources, Mounts: mounts, Security: security(pod, c),
		Stdin: c.Stdin, StdinOnce: c.StdinOnce, TTY: c.TTY,
	})
	var cfgErr *kruntime.ConfigError
	switch {
	case err == nil:
	case errors.As(err, &cfgErr):
		k.recorder.Eventf(ctx, pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		return &waitInfo{"CreateContainerConfigError", cfgErr.Msg}, k.cfg.BackoffBase, nil
	case errdefs.IsAlreadyExists(err):
		k.enqueue(controllerkit.KeyOf(pod), false) // that attempt exists already: look again
		return nil, 0, nil
	case errdefs.IsNotFound(err) && strings.HasPrefix(err.Error(), "image "):
		msg := fmt.Sprintf("image %q is not present on the node and there is no registry to pull from", c.Image)
		k.recorder.Eventf(ctx, pod, corev1.EventTypeWarning, "ErrImageNeverPull", "Container image %q is not present", c.Image)
		return &waitInfo{"ErrImageNeverPull", msg}, k.cfg.BackoffBase, nil
	default:
		k.recorder.Eventf(ctx, pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		return &waitInfo{"RunContainerError", err.Error()}, k.cfg.BackoffBase, nil
	}
	k.recorder.Eventf(ctx, pod, corev1.EventTypeNormal, "Created", "Created container %s", c.Name)
	k.recorder.Eventf(ctx, pod, corev1.EventTypeNormal, "Started", "Started container %s", c.Name)
	if w := k.postStart(ctx, pod, c, sb.IP, ctr.ID); w != nil {
		return w, k.cfg.BackoffBase, nil
	}
	return nil, 0, nil
}

// terminate stops a pod being deleted: every container gets the pod's grace period, then the
// sandbox goes, then the pod is deleted for good (grace 0, only this incarnation of it).
func (k *kubelet) terminate(ctx context.Context, pod *corev1.Pod, cur *kruntime.SandboxStatus) error {
	grace := terminationGrace(pod)
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	k.probes.retain(pod.UID, nil)
	if cur != nil {
		// The app containers (and an init container still running) stop first, then the
		// sidecars one by one in reverse order, so what the app leans on outlives it; all
		// within the one grace period.
		deadline := time.Now().Add(grace)
		for _, wave := range stopOrder(pod, cur) {
			if err := k.stopAll(ctx, pod, wave, max(time.Until(deadline), 0)); err != nil {
				return err
			}
		}
	}
	if err := k.rt.StopSandbox(ctx, string(pod.UID)); err != nil {
		return err
	}
	k.forgetUID(pod.UID)
	uid := pod.UID
	err := k.client.Delete(ctx, controllerkit.MustKind("", "pods"), pod.Namespace, pod.Name,
		&metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0)), Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func (k *kubelet) reportStatus(ctx context.Context, pod *corev1.Pod, sb *kruntime.Sandbox, attempts map[string][]kruntime.ContainerStatus, waiting map[string]waitInfo) error {
	st := k.podStatus(pod, sb, attempts, waiting)
	if apiequality.Semantic.DeepEqual(st, pod.Status) {
		return nil
	}
	next := pod.DeepCopy()
	next.Status = st
	_, err := k.client.UpdateStatus(ctx, next)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		k.observeStartup(pod, st)
	}
	return err
}

func (k *kubelet) podRuntime(ctx context.Context, uid types.UID) (*kruntime.SandboxStatus, error) {
	all, err := k.rt.List(ctx)
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].PodUID == string(uid) {
			return &all[i], nil
		}
	}
	return nil, nil
}

func sandboxConfig(pod *corev1.Pod, dns resolvconf.Config) kruntime.SandboxConfig {
	sc := kruntime.SandboxConfig{PodUID: string(pod.UID), PodName: pod.Name, PodNamespace: pod.Namespace, Hostname: pod.Spec.Hostname,
		Resources:  kruntime.PodResourcesFor(pod),
		DNSServers: dns.Nameservers, DNSSearches: dns.Searches, DNSOptions: dns.Options}
	for _, a := range pod.Spec.HostAliases {
		sc.HostAliases = append(sc.HostAliases, kruntime.HostAlias{IP: a.IP, Hostnames: a.Hostnames})
	}
	// hostPorts are the node proxy's (eBPF), not portmap's: see actors/proxy/hostports.go.
	return sc
}

// allContainers are the pod's init containers, then its app containers.
func allContainers(pod *corev1.Pod) []*corev1.Container {
	out := make([]*corev1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// byName groups a pod's container attempts by container name, oldest first.
func byName(sb *kruntime.SandboxStatus) map[string][]kruntime.ContainerStatus {
	out := map[string][]kruntime.ContainerStatus{}
	if sb == nil {
		return out
	}
	for _, c := range sb.Containers { // List sorts by name, then attempt
		out[c.Name] = append(out[c.Name], c)
	}
	return out
}

func latest(atts []kruntime.ContainerStatus) *kruntime.ContainerStatus {
	if len(atts) == 0 {
		return nil
	}
	return &atts[len(atts)-1]
}

func wantsRestart(policy corev1.RestartPolicy, exitCode int) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	default:
		return true
	}
}

func terminationGrace(pod *corev1.Pod) time.Duration {
	if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return corev1.DefaultTerminationGracePeriodSeconds * time.Second
}

// ensureImage applies the container's imagePullPolicy: Always pulls, IfNotPresent pulls only
// when the node lacks the image, Never leaves it to the start to report ErrImageNeverPull.
func (k *kubelet) ensureImage(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (*waitInfo, error) {
	switch {
	case c.ImagePullPolicy == corev1.PullNever:
		return nil, nil
	case c.ImagePullPolicy != corev1.PullAlways && k.rt.HasImage(ctx, c.Image):
		k.recorder.Eventf(ctx, pod, corev1.EventTypeNormal, "Pulled", "Container image %q already present on machine", c.Image)
		return nil, nil
	}
	k.recorder.Eventf(ctx, pod, corev1.EventTypeNormal, "Pulling", "Pulling image %q", c.Image)
	start := time.Now()
	if err := k.rt.Pull(ctx, c.Image); err != nil {
		k.recorder.Eventf(ctx, pod, corev1.EventTypeWarning, "Failed", "Failed to pull image %q: %v", c.Image, err)
		return &waitInfo{"ErrImagePull", err.Error()}, nil
	}
	k.recorder.Eventf(ctx, pod, corev1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %v", c.Image, time.Since(start).Round(time.Millisecond))
	return nil, nil
}
