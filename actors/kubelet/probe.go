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

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
)

// probeManager holds the probe results of every running container that has probes, one
// probeWorker per container attempt (by containerd ID). It lives in the kubelet's closure, so
// results survive the restart of a probe's actor, its pod's actor and the kubelet actor; the
// probes themselves run in probe actors (probeactor.go), which record their results here and
// enqueue their pod, whose sync reads them.
type probeManager struct {
	k      *kubelet
	client *http.Client

	mu      sync.Mutex
	workers map[string]*probeWorker
}

type probeWorker struct {
	uid types.UID

	mu         sync.Mutex
	started    bool // the startup probe passed (or there is none)
	ready      bool
	liveFailed bool   // liveness (or startup) failed: the container is to be restarted
	why        string // the last failure, for the Killing event
	runs       map[string]*probeRuns
}

// probeRuns are one probe's consecutive successes and failures.
type probeRuns struct{ successes, failures int }

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

// ensure keeps a result record for a running container and returns the probes it wants now:
// its startup probe until that passed, then its liveness and readiness probes; none once a
// probe condemned it.
func (m *probeManager) ensure(pod *corev1.Pod, c *corev1.Container, ctr kruntime.ContainerStatus, podIP string) []probeSpec {
	if !hasProbes(c) {
		return nil
	}
	m.mu.Lock()
	w := m.workers[ctr.ID]
	if w == nil {
		w = &probeWorker{uid: pod.UID, started: c.StartupProbe == nil, runs: map[string]*probeRuns{}}
		w.adopt(pod, ctr.ID)
		m.workers[ctr.ID] = w
	}
	m.mu.Unlock()
	w.mu.Lock()
	started, condemned := w.started, w.liveFailed
	w.mu.Unlock()
	startedAt := ctr.StartedAt
	if startedAt.IsZero() {
		startedAt = time.Now()
	}
	var out []probeSpec
	add := func(kind string, p *corev1.Probe) {
		if p != nil {
			out = append(out, probeSpec{kind: kind, probe: p, pod: pod, c: c, ctrID: ctr.ID, podIP: podIP, started: startedAt, w: w})
		}
	}
	switch {
	case condemned:
	case !started:
		add("Startup", c.StartupProbe)
	default:
		add("Liveness", c.LivenessProbe)
		add("Readiness", c.ReadinessProbe)
	}
	return out
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

// retain drops the results of the pod's containers that are not in keep.
func (m *probeManager) retain(uid types.UID, keep map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, w := range m.workers {
		if w.uid == uid && !keep[id] {
			delete(m.workers, id)
		}
	}
}

// record applies one probe run to the container's results (thresholds as in Kubernetes) and
// reports whether a result changed and whether this probe is done (it decided for good).
func (w *probeWorker) record(kind string, p *corev1.Probe, ok bool) (changed, done bool) {
	failureThreshold, successThreshold := int(max(p.FailureThreshold, 1)), int(max(p.SuccessThreshold, 1))
	if kind != "Readiness" {
		successThreshold = 1
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.runs[kind]
	if r == nil {
		r = &probeRuns{}
		w.runs[kind] = r
	}
	if ok {
		r.successes, r.failures = r.successes+1, 0
	} else {
		r.successes, r.failures = 0, r.failures+1
	}
	switch kind {
	case "Startup":
		if ok {
			w.started, changed = true, true
		} else if r.failures >= failureThreshold {
			w.liveFailed, w.why, changed = true, "failed startup probe", true
		}
	case "Liveness":
		if !ok && r.failures >= failureThreshold {
			w.liveFailed, w.why, changed = true, "failed liveness probe", true
		}
	case "Readiness":
		if ok && r.successes >= successThreshold && !w.ready {
			w.ready, changed = true, true
		} else if !ok && r.failures >= failureThreshold && w.ready {
			w.ready, changed = false, true
		}
	}
	return changed, w.decided(kind)
}

// decided reports whether a probe of kind has nothing left to find out (w.mu held).
func (w *probeWorker) decided(kind string) bool {
	switch kind {
	case "Startup":
		return w.started || w.liveFailed
	case "Liveness":
		return w.liveFailed
	}
	return false
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
