// Package systembench measures the system users run, as separate processes built from this
// tree: `skiff up --agent=false` (every controller, embedded NATS), `skiff sim nodes` joined to
// it, one Deployment created with one `kubectl apply` and then scaled with `kubectl scale`,
// pods and nodes watched with client-go from the bench.
package systembench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
)

// Options size the run.
type Options struct {
	Nodes   int // simulated nodes; default 5000
	Pods    int // replicas of the Deployment as applied; default 10000
	ScaleTo int // replicas it is then scaled to; default 3*Pods; <= Pods: no second phase
	// Timeout bounds each wait (skiff up ready, nodes Ready, each phase); default 15 min.
	Timeout time.Duration
	// ProfileDir keeps the CPU profiles (skiff up's chunks, the simulated nodes' chunks, the
	// bench's own) and skiff up's heap profile at the end of each phase; by default they go
	// with the temp dir.
	ProfileDir string
	// Progress gets a line per step and every 10 s of a wait; default stderr.
	Progress io.Writer
}

func (o *Options) defaults() {
	if o.Nodes <= 0 {
		o.Nodes = 5000
	}
	if o.Pods <= 0 {
		o.Pods = 10000
	}
	if o.ScaleTo == 0 {
		o.ScaleTo = 3 * o.Pods
	}
	if o.Timeout <= 0 {
		o.Timeout = 15 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = os.Stderr
	}
}

const (
	namespace  = "default"
	deployment = "systembench"
	selector   = "app=" + deployment
	// Requests make the scheduler fit pods by resources, as a user's Deployment would; a
	// simulated node runs any image without pulling it.
	manifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + deployment + `
  namespace: ` + namespace + `
spec:
  replicas: %d
  selector:
    matchLabels:
      app: ` + deployment + `
  template:
    metadata:
      labels:
        app: ` + deployment + `
    spec:
      containers:
      - name: app
        image: skiff.sh/systembench:1
        resources:
          requests:
            cpu: 10m
            memory: 16Mi
`
)

// run is one bench run's processes and clients.
type run struct {
	o              Options
	dir, data      string
	skiff, kubectl string
	up, sim        *proc
	kubeconfig     string
	cs             kubernetes.Interface
	w              *watchers
	stopWatch      context.CancelFunc
	prof, simProf  *cpuProfiler // skiff up's, the simulated nodes'
	selfProf       *selfProfiler
	natsPort       int
	nodesReadyIn   time.Duration
}

// phase is what one measured window saw.
type phase struct {
	pods        int
	took        time.Duration
	fromCreated []time.Duration
	stopped     int // went Running in the window, then stopped
	up, sim     memory
	upGrowth    int64            // VmRSS at the end minus at the start
	cpu         [3]time.Duration // used in the window by skiff up, the sim, the bench
	writes      uint64           // state-log revisions written in the window, every kind
	notReady    int
	heap        heapStats // skiff up's after a forced GC at the end
}

// Run prints the system table, then the CPU profile's top functions. Every process it starts
// and its temp dir are gone when it returns, also on error or interrupt.
func Run(w io.Writer, o Options) error {
	o.defaults()
	if o.Pods > o.Nodes*110 || o.ScaleTo > o.Nodes*110 {
		return fmt.Errorf("%d nodes hold at most %d pods (110 each)", o.Nodes, o.Nodes*110)
	}
	// SIGPIPE too: output piped into a reader that quit (| head) must still tear down.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	defer stop()
	dir, err := os.MkdirTemp("", "skiff-systembench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	r := &run{o: o, dir: dir, data: filepath.Join(dir, "data")}
	defer r.teardown()
	if err := r.start(ctx); err != nil {
		return err
	}
	path := filepath.Join(dir, "deployment.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, manifest, o.Pods), 0o644); err != nil {
		return err
	}
	phases := []*phase{}
	p, err := r.measure(ctx, 1, o.Pods, "apply", "apply", "-f", path)
	if err != nil {
		return err
	}
	phases = append(phases, p)
	if o.ScaleTo > o.Pods {
		p, err := r.measure(ctx, 2, o.ScaleTo, "scale", "scale", "deployment/"+deployment, "--replicas="+strconv.Itoa(o.ScaleTo))
		if err != nil {
			return err
		}
		phases = append(phases, p)
	}
	if err := r.writeTable(w, phases); err != nil {
		return err
	}
	for _, p := range []*profiles{&r.prof.profiles, &r.simProf.profiles, &r.selfProf.profiles} {
		if err := p.writeTop(w, 15, o.ProfileDir); err != nil {
			return fmt.Errorf("CPU profile: %w", err)
		}
	}
	return nil
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.o.Progress, "system: "+format+"\n", args...)
}

// start builds the binaries, starts skiff up, the watches and the simulated nodes, and waits
// for every node to be Ready.
func (r *run) start(ctx context.Context) error {
	began := time.Now()
	var err error
	if r.skiff, r.kubectl, err = buildBinaries(ctx, r.dir); err != nil {
		return err
	}
	r.logf("built skiff and kubectl in %v", since(began))
	if r.natsPort, err = benchutil.FreePort(); err != nil {
		return err
	}
	began = time.Now()
	r.up, err = startProc(r.dir, "skiff-up", r.skiff, "up", "--agent=false", "--data-dir", r.data,
		"--listen", "127.0.0.1:0", "--nats-port", strconv.Itoa(r.natsPort), "--metrics-listen", "")
	if err != nil {
		return err
	}
	cfg, err := r.waitUp(ctx)
	if err != nil {
		return err
	}
	r.logf("skiff up ready in %v (API %s, NATS port %d)", since(began), cfg.Host, r.natsPort)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	r.prof = &cpuProfiler{client: httpClient, url: cfg.Host, dir: r.dir, prefix: "cpu", profiles: profiles{title: "skiff up"}}
	r.selfProf = &selfProfiler{dir: r.dir, profiles: profiles{title: "the bench (its client-go watches)"}}
	// The watches start before the nodes exist, so every node's first Ready is seen.
	watchCtx, cancel := context.WithCancel(ctx)
	r.stopWatch = cancel
	if r.w, err = startWatchers(watchCtx, r.cs, namespace, selector); err != nil {
		return err
	}
	simPprof, err := benchutil.FreePort()
	if err != nil {
		return err
	}
	began = time.Now()
	r.sim, err = startProc(r.dir, "skiff-sim", r.skiff, "sim", "nodes", "--count", strconv.Itoa(r.o.Nodes),
		"--nats-url", fmt.Sprintf("nats://127.0.0.1:%d", r.natsPort), "--data-dir", r.data,
		"--pprof-listen", fmt.Sprintf("127.0.0.1:%d", simPprof))
	if err != nil {
		return err
	}
	r.simProf = &cpuProfiler{client: &http.Client{}, url: fmt.Sprintf("http://127.0.0.1:%d", simPprof), dir: r.dir,
		prefix: "sim-cpu", profiles: profiles{title: "skiff sim nodes"}}
	err = r.wait(ctx, "nodes Ready", func() (bool, string) {
		ready, _ := r.w.nodes.counts()
		return ready >= r.o.Nodes, fmt.Sprintf("%d of %d nodes Ready", ready, r.o.Nodes)
	})
	if err != nil {
		return err
	}
	r.nodesReadyIn = time.Since(began)
	r.logf("%d nodes Ready in %v", r.o.Nodes, since(began))
	return nil
}

// waitUp waits for skiff up's kubeconfig and /readyz.
func (r *run) waitUp(ctx context.Context) (*rest.Config, error) {
	r.kubeconfig = filepath.Join(r.data, "kubeconfig")
	var cfg *rest.Config
	err := r.wait(ctx, "skiff up", func() (bool, string) {
		if _, err := os.Stat(r.kubeconfig); err != nil {
			return false, "no kubeconfig yet"
		}
		if cfg == nil {
			c, err := clientcmd.BuildConfigFromFlags("", r.kubeconfig)
			if err != nil {
				return false, err.Error()
			}
			// The bench's watches and profile fetches must not queue behind a client-side limit.
			c.QPS, c.Burst = 1000, 2000
			// Protobuf, as clusterloader2 configures its clients: the pod watch and lists
			// then cost what Kubernetes' own clients cost.
			c.ContentType = runtime.ContentTypeProtobuf
			cs, err := kubernetes.NewForConfig(c)
			if err != nil {
				return false, err.Error()
			}
			cfg, r.cs = c, cs
		}
		_, err := r.cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, "/readyz: " + err.Error()
		}
		return true, ""
	})
	return cfg, err
}

// measure runs one kubectl command and waits for target pods Running at once; the pods the
// watch first sees meanwhile are this phase's.
func (r *run) measure(ctx context.Context, n, target int, tag string, kubectl ...string) (*phase, error) {
	upBefore, err := readMemory(r.up.pid())
	if err != nil {
		return nil, err
	}
	cpuBefore, err := r.cpu()
	if err != nil {
		return nil, err
	}
	revBefore, err := r.logRevision(ctx)
	if err != nil {
		return nil, err
	}
	before, _ := r.w.pods.progress()
	r.w.pods.begin(n, target)
	for _, stop := range []func(){r.prof.window(ctx, tag), r.simProf.window(ctx, tag), r.selfProf.window(tag)} {
		defer stop()
	}
	began := time.Now()
	out, err := runKubectl(ctx, r.kubectl, r.kubeconfig, filepath.Join(r.dir, "kubectl-cache"), kubectl...)
	if err != nil {
		return nil, err
	}
	r.logf("kubectl %s: %s", kubectl[0], out)
	var reached time.Time
	err = r.wait(ctx, tag, func() (bool, string) {
		running, at := r.w.pods.progress()
		reached = at
		return !at.IsZero(), fmt.Sprintf("%d of %d pods Running", running, target)
	})
	if err != nil {
		return nil, err
	}
	p := &phase{pods: target - before, took: reached.Sub(began)}
	revAfter, err := r.logRevision(ctx)
	if err != nil {
		return nil, err
	}
	p.writes = revAfter - revBefore
	if p.up, err = readMemory(r.up.pid()); err != nil {
		return nil, err
	}
	if p.sim, err = readMemory(r.sim.pid()); err != nil {
		return nil, err
	}
	p.upGrowth = int64(p.up.now) - int64(upBefore.now)
	if p.cpu, err = r.cpu(); err != nil {
		return nil, err
	}
	for i := range p.cpu {
		p.cpu[i] -= cpuBefore[i]
	}
	// After RSS and CPU are read: the forced GC would lower the one and add to the other.
	if p.heap, err = r.prof.heap(ctx, tag, r.o.ProfileDir); err != nil {
		return nil, err
	}
	_, p.notReady = r.w.nodes.counts()
	p.fromCreated, p.stopped = r.w.pods.latencies(n)
	r.logf("%d pods Running in %v", p.pods, p.took.Round(time.Millisecond))
	return p, nil
}

// logRevision is the state log's newest revision: a list's resourceVersion is the log's, as a
// kube list's is etcd's, whatever kind is listed. Every write of every kind advances it by one,
// so the difference over a window counts what the whole system wrote (pods, bindings, statuses,
// Events, Leases, controllers' status).
func (r *run) logRevision(ctx context.Context) (uint64, error) {
	l, err := r.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, fmt.Errorf("state-log revision: %w", err)
	}
	rev, err := strconv.ParseUint(l.ResourceVersion, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("state-log revision %q: %w", l.ResourceVersion, err)
	}
	return rev, nil
}

// cpu is the CPU time used so far by skiff up, the sim and the bench itself.
func (r *run) cpu() ([3]time.Duration, error) {
	var out [3]time.Duration
	for i, pid := range []int{r.up.pid(), r.sim.pid(), os.Getpid()} {
		d, err := cpuTime(pid)
		if err != nil {
			return out, err
		}
		out[i] = d
	}
	return out, nil
}

// wait polls check until it is done, either process ends, or the timeout passes.
func (r *run) wait(ctx context.Context, what string, check func() (done bool, status string)) error {
	deadline := time.Now().Add(r.o.Timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	lastLog := time.Now()
	for {
		for _, p := range []*proc{r.up, r.sim} {
			if p != nil {
				if err := p.exited(); err != nil {
					return err
				}
			}
		}
		done, status := check()
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not done after %v: %s%s", what, r.o.Timeout, status, r.logTails())
		}
		if time.Since(lastLog) >= 10*time.Second {
			r.logf("%s: %s", what, status)
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (%s)", what, context.Cause(ctx), status)
		case <-tick.C:
		}
	}
}

func (r *run) logTails() string {
	s := ""
	for _, p := range []*proc{r.up, r.sim} {
		if p != nil {
			s += fmt.Sprintf("\n%s, last output:\n%s", p.name, p.tail(10))
		}
	}
	return s
}

// teardown stops the watches, then the simulated nodes, then skiff up.
func (r *run) teardown() {
	if r.stopWatch != nil {
		r.stopWatch()
	}
	for _, p := range []*proc{r.sim, r.up} {
		if p != nil {
			p.stop(15 * time.Second)
		}
	}
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }
