package kubelet

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
)

// probeManager runs the startup, liveness and readiness probes of every running container
// that has any, one worker per container attempt (by containerd ID). Workers report result
// changes by enqueueing their pod; the pod sync reads the results.
type probeManager struct {
	k      *kubelet
	client *http.Client

	mu      sync.Mutex
	workers map[string]*probeWorker
}

type probeWorker struct {
	uid    types.UID
	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.Mutex
	started    bool // the startup probe passed (or there is none)
	ready      bool
	liveFailed bool   // liveness (or startup) failed: the container is to be restarted
	why        string // the last failure, for the Killing event
	startedCh  chan struct{}
}

// probeResult is what the pod sync needs of one container.
type probeResult struct {
	Started, Ready, LiveFailed bool
	Why                        string
}

func newProbeManager(k *kubelet) *probeManager {
	return &probeManager{
		k: k, workers: map[string]*probeWorker{},
		client: &http.Client{Transport: &http.Transport{
			DisableKeepAlives: true,                                  // a probe per period per pod must not pile up idle connections
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // probes do not verify, as in Kubernetes
		}},
	}
}

func hasProbes(c *corev1.Container) bool {
	return c.StartupProbe != nil || c.LivenessProbe != nil || c.ReadinessProbe != nil
}

// ensure starts the worker of a running container once; ctx is the agent incarnation's, so
// a restarted agent starts fresh workers.
func (m *probeManager) ensure(ctx context.Context, pod *corev1.Pod, c *corev1.Container, ctr kruntime.ContainerStatus, podIP string) {
	if !hasProbes(c) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if w := m.workers[ctr.ID]; w != nil && w.ctx.Err() == nil {
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &probeWorker{uid: pod.UID, ctx: wctx, cancel: cancel, started: c.StartupProbe == nil, startedCh: make(chan struct{})}
	if w.started {
		close(w.startedCh)
	}
	m.workers[ctr.ID] = w
	key := controllerkit.KeyOf(pod)
	pod, c = pod.DeepCopy(), c.DeepCopy()
	started := ctr.StartedAt
	if started.IsZero() {
		started = time.Now()
	}
	for kind, p := range map[string]*corev1.Probe{"Startup": c.StartupProbe, "Liveness": c.LivenessProbe, "Readiness": c.ReadinessProbe} {
		if p != nil {
			go m.loop(w, kind, p, pod, c, ctr.ID, podIP, key, started)
		}
	}
}

// result is the probe state of a container attempt; one without probes is started and ready.
func (m *probeManager) result(id string, c *corev1.Container) probeResult {
	if !hasProbes(c) {
		return probeResult{Started: true, Ready: true}
	}
	m.mu.Lock()
	w := m.workers[id]
	m.mu.Unlock()
	if w == nil {
		return probeResult{Started: c.StartupProbe == nil, Ready: false}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return probeResult{Started: w.started, Ready: w.started && (c.ReadinessProbe == nil || w.ready), LiveFailed: w.liveFailed, Why: w.why}
}

// retain stops the workers of the pod's containers that are not in keep.
func (m *probeManager) retain(uid types.UID, keep map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, w := range m.workers {
		if w.uid == uid && !keep[id] {
			w.cancel()
			delete(m.workers, id)
		}
	}
}

func (m *probeManager) loop(w *probeWorker, kind string, p *corev1.Probe, pod *corev1.Pod, c *corev1.Container, id, podIP, key string, started time.Time) {
	ctx := w.ctx
	if kind != "Startup" {
		select {
		case <-w.startedCh:
		case <-ctx.Done():
			return
		}
	}
	period := secondsOr(p.PeriodSeconds, 10)
	failureThreshold, successThreshold := int(max(p.FailureThreshold, 1)), int(max(p.SuccessThreshold, 1))
	if kind != "Readiness" {
		successThreshold = 1
	}
	first := time.Until(started.Add(time.Duration(p.InitialDelaySeconds) * time.Second))
	timer := time.NewTimer(max(first, 0))
	defer timer.Stop()
	var successes, failures int
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		ranAt := time.Now()
		ok, msg := m.probe(ctx, p, c, podIP, id)
		if ctx.Err() != nil {
			return
		}
		if ok {
			successes, failures = successes+1, 0
		} else {
			successes, failures = 0, failures+1
			m.k.recorder.Eventf(ctx, pod, corev1.EventTypeWarning, "Unhealthy", "%s probe failed: %s", kind, msg)
		}
		changed, stop := false, false
		w.mu.Lock()
		switch kind {
		case "Startup":
			if ok {
				w.started, changed, stop = true, true, true
				close(w.startedCh)
			} else if failures >= failureThreshold {
				w.liveFailed, w.why, changed, stop = true, "failed startup probe", true, true
			}
		case "Liveness":
			if !ok && failures >= failureThreshold {
				w.liveFailed, w.why, changed, stop = true, "failed liveness probe", true, true
			}
		case "Readiness":
			if ok && successes >= successThreshold && !w.ready {
				w.ready, changed = true, true
			} else if !ok && failures >= failureThreshold && w.ready {
				w.ready, changed = false, true
			}
		}
		w.mu.Unlock()
		if changed {
			m.k.traceProbeChange(pod, kind, c.Name, ok, msg, ranAt)
			m.k.queue.Add(key)
		}
		if stop {
			return
		}
		timer.Reset(period)
	}
}

func secondsOr(s int32, def int32) time.Duration {
	if s <= 0 {
		s = def
	}
	return time.Duration(s) * time.Second
}

// probe runs one check with the probe's timeout; it reports success and, on failure, why.
func (m *probeManager) probe(ctx context.Context, p *corev1.Probe, c *corev1.Container, podIP, id string) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, secondsOr(p.TimeoutSeconds, 1))
	defer cancel()
	switch {
	case p.HTTPGet != nil:
		h := p.HTTPGet
		port, err := resolvePort(h.Port, c)
		if err != nil {
			return false, err.Error()
		}
		host := h.Host
		if host == "" {
			host = podIP
		}
		scheme := strings.ToLower(string(h.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		path := h.Path
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+net.JoinHostPort(host, strconv.Itoa(port))+path, nil)
		if err != nil {
			return false, err.Error()
		}
		req.Header.Set("User-Agent", "kube-probe/"+strings.TrimPrefix(Version, "v"))
		for _, hd := range h.HTTPHeaders {
			if strings.EqualFold(hd.Name, "host") {
				req.Host = hd.Value
			} else {
				req.Header.Add(hd.Name, hd.Value)
			}
		}
		resp, err := m.client.Do(req)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return false, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)
		}
		return true, ""
	case p.TCPSocket != nil:
		port, err := resolvePort(p.TCPSocket.Port, c)
		if err != nil {
			return false, err.Error()
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = podIP
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	case p.Exec != nil:
		var out lockedBuffer // stdout and stderr are copied by two goroutines
		code, err := m.k.rt.Exec(ctx, id, p.Exec.Command, nil, &out, &out, false)
		if err != nil {
			return false, err.Error()
		}
		if code != 0 {
			return false, fmt.Sprintf("command %q exited with %d: %s", p.Exec.Command, code, strings.TrimSpace(out.String()))
		}
		return true, ""
	default:
		return true, "" // gRPC probes are not supported: never fail a pod on them
	}
}

func resolvePort(port intstr.IntOrString, c *corev1.Container) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(port.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, port.StrVal)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
