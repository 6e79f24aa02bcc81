// Package dnsbench compares Skiff's cluster DNS server with CoreDNS's kubernetes plugin, side by
// side in one run: both read the same Services and EndpointSlices from one `skiff up` (Skiff's
// from the state log as `skiff dns`, CoreDNS through the API with a kubeconfig), each is loaded
// alone, with the same queries, and measured as a process of its own.
package dnsbench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
)

// Options size the DNS suite.
type Options struct {
	Sizes    []int         // Services in the cluster, one measurement each; default 1,000 and 10,000
	Workers  int           // concurrent queries in flight; default 32
	Duration time.Duration // each load run; default 5 s
	Flips    int           // endpoint readiness changes timed per server; default 10
}

const (
	namespace = "bench"
	managedBy = "skiff-bench" // not the EndpointSlice controller's: it leaves these slices alone
	flipName  = "flip"        // the headless Service whose endpoint turns Ready
)

// server is one DNS server under test.
type server struct {
	name  string
	start func(ctx context.Context) (*child, string, error)
}

// result is one server's measurements at one size.
type result struct {
	load  loadResult
	ready [2]time.Duration // p50, max from Ready written to the new answer
	rss   uint64
	anon  uint64 // of rss, not file-backed
	heap  int    // MiB live after the last collection
}

// Run prints the comparison table.
func Run(w io.Writer, o Options) error {
	if len(o.Sizes) == 0 {
		o.Sizes = []int{1000, 10000}
	}
	o.Workers = cmp.Or(o.Workers, 32)
	o.Duration = cmp.Or(o.Duration, 5*time.Second)
	o.Flips = cmp.Or(o.Flips, 10)
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "skiff-dnsbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	skiff, dnsBin, coredns, err := buildBins(ctx, dir)
	if err != nil {
		return err
	}
	natsPort, err := benchutil.FreePort()
	if err != nil {
		return err
	}
	data := filepath.Join(dir, "data")
	up, err := spawn(dir, "skiff-up", skiff, "up", "--agent=false", "--data-dir", data, "--listen", "127.0.0.1:0",
		"--nats-port", strconv.Itoa(natsPort), "--metrics-listen", "")
	if err != nil {
		return err
	}
	defer up.stop()
	kubeconfig := filepath.Join(data, "kubeconfig")
	cs, err := waitAPI(ctx, kubeconfig)
	if err != nil {
		return fmt.Errorf("skiff up: %w", err)
	}
	if err := setup(ctx, cs); err != nil {
		return err
	}
	t := benchutil.NewTable(w, "Services", "server", "queries/s", "p50", "p99", "failed", "Ready→answer p50", "max", "RSS MiB", "anon MiB", "live heap MiB")
	have := 0
	last := netip.MustParseAddr("10.255.0.0")
	newIP := func() string { last = last.Next(); return last.String() }
	for _, n := range o.Sizes {
		if err := populate(ctx, cs, have, n); err != nil {
			return err
		}
		have = max(have, n)
		names := make([]string, n)
		for i := range names {
			names[i] = svcName(i) + "." + namespace + ".svc.cluster.local."
		}
		dns := func(env []string, extra ...string) func(ctx context.Context) (*child, string, error) {
			return func(ctx context.Context) (*child, string, error) {
				return startSkiffDNS(ctx, dir, data, skiff, dnsBin, natsPort, env, extra...)
			}
		}
		agentGC := []string{"GOGC=100"}
		servers := []server{
			{"skiff dns", dns(nil)},
			{"coredns " + corednsVersion, func(ctx context.Context) (*child, string, error) {
				return startCoreDNS(ctx, dir, coredns, kubeconfig, names[n-1])
			}},
			// skiff dns collects at GOGC=50 by default; CoreDNS users can set the same.
			{"coredns " + corednsVersion + ", GOGC=50", func(ctx context.Context) (*child, string, error) {
				return startCoreDNS(ctx, dir, coredns, kubeconfig, names[n-1], "GOGC=50")
			}},
			// A node agent's DNS shares the informers its proxy keeps whole: what DNS adds to
			// it is the server on those informers less the same informers alone, both at the
			// agent's GOGC (Go's default).
			{"skiff dns, whole objects", dns(agentGC, "--whole-objects")},
			{"same informers, no server", dns(agentGC, "--whole-objects", "--no-server")},
		}
		var res []result
		for _, s := range servers {
			r, err := measure(ctx, cs, s, names, o, newIP)
			if err != nil {
				return fmt.Errorf("%s at %d Services: %w", s.name, n, err)
			}
			res = append(res, r)
			if r.load.qps == 0 { // no server: only its memory
				t.Row(n, s.name, "", "", "", "", "", "", mib(int64(r.rss)), mib(int64(r.anon)), r.heap)
				continue
			}
			t.Row(n, s.name, fmt.Sprintf("%.0f", r.load.qps), r.load.p50.Round(time.Microsecond), r.load.p99.Round(time.Microsecond),
				r.load.failed, r.ready[0].Round(time.Millisecond), r.ready[1].Round(time.Millisecond), mib(int64(r.rss)), mib(int64(r.anon)), r.heap)
			if label := map[int]string{2: "skiff/coredns", 3: "skiff/coredns GOGC=50"}[len(res)]; label != "" {
				t.Row(n, label, fmt.Sprintf("%.2fx", res[0].load.qps/r.load.qps), "", "", "", "", "",
					ratio(res[0].rss, r.rss), ratio(res[0].anon, r.anon), fmt.Sprintf("%.2fx", float64(res[0].heap)/float64(r.heap)))
			}
		}
		share, shareAnon := int64(res[3].rss)-int64(res[4].rss), int64(res[3].anon)-int64(res[4].anon)
		t.Row(n, "DNS's share of a node agent", "", "", "", "", "", "", mib(share), mib(shareAnon), res[3].heap-res[4].heap)
		t.Row(n, "share/coredns", "", "", "", "", "", "", fmt.Sprintf("%.2fx", float64(share)/float64(res[1].rss)),
			fmt.Sprintf("%.2fx", float64(shareAnon)/float64(res[1].anon)), "")
	}
	if err := t.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, notes, o.Workers, o.Duration)
	return nil
}

// notes explain the table, with the load's workers and duration.
const notes = `Load: %d queries in flight over UDP (closed loop), A for a random Service, %v per server, one server at a time on this host.
RSS: each server's whole process after its load run (skiff dns: the DNS actor with its own NATS connection and informers,
  which keep only the fields DNS reads, over a state-log view of Services and EndpointSlices that keeps their values packed).
  anon: the part of RSS that is not the executable's file pages (heap, stacks, runtime); the rest is the code and read-only
  data its run touched, which for skiff dns is the multi-purpose skiff binary's (every linked package's init runs).
  Both servers run from copies of their binaries in the run's directory, evicted from the page cache before each start,
  so each maps what its own run reads, as after a boot (not the 2 MiB folios a binary just written by the linker sits in).
  Live heap: the Go heap its last collection found live (GODEBUG=gctrace=1).
GC: skiff dns collects at GOGC=50 unless GOGC is set (its default); CoreDNS runs at Go's default (100) and, in its own
  row, at GOGC=50 as its users could set it.
DNS's share of a node agent: skiff dns on informers keeping whole objects (as a node agent's, shared with its proxy, do)
  less the same process with those informers and no server, both at GOGC=100 as the agent runs: what running DNS adds to a
  node, against CoreDNS's whole process.
Ready→answer: an endpoint's ready condition written through the API until the server's answer has its address (polled every ms).
`

// measure starts one server, loads it, times readiness changes through it and reads its RSS.
// Each readiness change uses an address from newIP, so its answer is new.
func measure(ctx context.Context, cs *kubernetes.Clientset, s server, names []string, o Options, newIP func() string) (result, error) {
	c, addr, err := s.start(ctx)
	if err != nil {
		return result{}, err
	}
	defer c.stop()
	if addr != "" && len(addrs(addr, names[len(names)-1])) == 0 {
		return result{}, fmt.Errorf("%s does not answer %s", addr, names[len(names)-1])
	}
	var r result
	if addr == "" { // informers only: nothing to load
		return r, c.memory(&r)
	}
	if r.load, err = load(ctx, addr, names, o.Workers, o.Duration); err != nil {
		return r, err
	}
	if err := c.memory(&r); err != nil {
		return r, err
	}
	var lat []time.Duration
	for range o.Flips {
		d, err := flip(ctx, cs, addr, newIP())
		if err != nil {
			return r, err
		}
		lat = append(lat, d)
	}
	r.ready[0], _ = benchutil.Percentiles(lat)
	r.ready[1] = slices.Max(lat)
	return r, nil
}

// memory reads the child's RSS and live heap into r.
func (c *child) memory(r *result) error {
	var err error
	if r.rss, r.anon, err = rss(c.cmd.Process.Pid); err != nil {
		return err
	}
	r.heap, err = c.liveHeap()
	return err
}

func ratio(a, b uint64) string { return fmt.Sprintf("%.2fx", float64(a)/float64(b)) }

func mib(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// flip adds a not-ready endpoint to the flip Service, waits until the server has had time to
// see it, turns it Ready and times until the server's answer holds its address.
func flip(ctx context.Context, cs *kubernetes.Clientset, server, ip string) (time.Duration, error) {
	esc := cs.DiscoveryV1().EndpointSlices(namespace)
	es, err := esc.Get(ctx, flipName, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	es.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: new(false)}}}
	if es, err = esc.Update(ctx, es, metav1.UpdateOptions{}); err != nil {
		return 0, err
	}
	time.Sleep(300 * time.Millisecond)
	es.Endpoints[0].Conditions.Ready = new(true)
	began := time.Now()
	if _, err := esc.Update(ctx, es, metav1.UpdateOptions{}); err != nil {
		return 0, err
	}
	for time.Since(began) < 30*time.Second {
		if got := addrs(server, flipName+"."+namespace+".svc.cluster.local."); len(got) == 1 && got[0] == ip {
			return time.Since(began), nil
		}
		time.Sleep(time.Millisecond)
	}
	return 0, fmt.Errorf("%s did not answer %s for %s within 30s of it turning Ready", server, ip, flipName)
}

// waitAPI waits for skiff up's kubeconfig and a ready API.
func waitAPI(ctx context.Context, kubeconfig string) (*kubernetes.Clientset, error) {
	var lastErr error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			lastErr = err
			continue
		}
		cfg.QPS, cfg.Burst = 2000, 4000
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		if _, lastErr = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); lastErr == nil {
			return cs, nil
		}
	}
	return nil, fmt.Errorf("API not ready in 2 min: %v", lastErr)
}

// setup makes the namespace and the headless flip Service with its (empty) slice.
func setup(ctx context.Context, cs *kubernetes.Clientset) error {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: flipName},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}}}
	if _, err := cs.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err := cs.DiscoveryV1().EndpointSlices(namespace).Create(ctx, slice(flipName, nil), metav1.CreateOptions{})
	return err
}

// populate creates Services from..to-1, each a ClusterIP Service without a selector and a
// slice of two ready endpoints, as a Deployment's would be.
func populate(ctx context.Context, cs *kubernetes.Clientset, from, to int) error {
	return benchutil.Parallel(32, to-from, func(i int) error {
		i += from - 1
		name := svcName(i)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		if _, err := cs.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return err
		}
		base := netip.AddrFrom4([4]byte{10, 200, byte(i >> 7), byte(i<<1) & 0xff})
		_, err := cs.DiscoveryV1().EndpointSlices(namespace).Create(ctx, slice(name, []string{base.String(), base.Next().String()}), metav1.CreateOptions{})
		return err
	})
}

func slice(svc string, ips []string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc, Labels: map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: managedBy}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(8080)), Protocol: new(corev1.ProtocolTCP)}},
	}
	for _, ip := range ips {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: new(true)}})
	}
	return es
}

func svcName(i int) string { return "svc-" + strconv.Itoa(i) }
