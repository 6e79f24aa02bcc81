// Package npbench measures NetworkPolicy enforcement: TCP connect latency from one pod to
// another through the policy programs on their veths, with no policy and with 1,000
// policies selecting the server, and how long computing and writing those policies' entries
// takes. The pods are network namespaces on a bridge in a private node namespace (as the
// CNI bridge wires them); the programs, maps and rule computation are the node agent's.
package npbench

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-sh/skiff/actors/netpol"
	"github.com/skiff-sh/skiff/bpf/policy"
	"github.com/skiff-sh/skiff/schemas/defaults"
	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
)

// Options tunes the run; zero fields take the defaults.
type Options struct {
	Policies []int // policy counts (default 0, 1000)
	Connects int   // timed connects per count (default 2000)
}

var (
	server = netip.MustParseAddr("10.77.0.2")
	client = netip.MustParseAddr("10.77.0.3")
)

const port = 8080

// Run executes the benchmark and writes one table to w. Without root it says why it skipped.
func Run(w io.Writer, opts Options) error {
	if len(opts.Policies) == 0 {
		opts.Policies = []int{0, 1000}
	}
	if opts.Connects <= 0 {
		opts.Connects = 2000
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(w, "npbench: skipped: needs root (eBPF programs, network namespaces, bpffs)")
		return nil
	}
	n, err := newNode()
	if err != nil {
		return fmt.Errorf("npbench: %w", err)
	}
	defer n.close()
	dp, err := policy.Load(filepath.Join(n.bpffs, "netpol"))
	if err != nil {
		return fmt.Errorf("npbench: %w", err)
	}
	defer dp.Close()
	if err := n.attach(dp); err != nil {
		return fmt.Errorf("npbench: %w", err)
	}
	if err := n.serve(netip.AddrPortFrom(server, port)); err != nil {
		return fmt.Errorf("npbench: server: %w", err)
	}
	t := benchutil.NewTable(w, "policies selecting the server", "rule entries", "compute", "map writes", "connect p50", "p99")
	for _, count := range opts.Policies {
		entries, compute, write, err := program(dp, count)
		if err != nil {
			return fmt.Errorf("npbench: %d policies: %w", count, err)
		}
		var p50, p99 time.Duration
		err = n.client.Do(func() error {
			var err error
			p50, p99, err = benchutil.ConnectLatency(netip.AddrPortFrom(server, port), opts.Connects)
			return err
		})
		if err != nil {
			return fmt.Errorf("npbench: %d policies: %w", count, err)
		}
		t.Row(count, entries, compute.Round(time.Microsecond), write.Round(time.Microsecond), p50.Round(time.Microsecond), p99.Round(time.Microsecond))
	}
	return t.Flush()
}

// program computes the server pod's entries under count policies (each allowing its own peer
// pod on its own port; the first also the client) and writes them, replacing the last run's.
func program(dp *policy.Dataplane, count int) (entries int, compute, write time.Duration, err error) {
	src := workload(count)
	srv := src.pods[0]
	start := time.Now()
	d, err := netpol.Compute(srv, server, src)
	if err != nil {
		return 0, 0, 0, err
	}
	computed := time.Since(start)
	for k, ports := range d.Rules {
		if err := dp.SetRule(k, ports); err != nil {
			return 0, 0, 0, err
		}
	}
	if err := dp.SetEndpoint(server, d.Endpoint); err != nil {
		return 0, 0, 0, err
	}
	return len(d.Rules), computed, time.Since(start) - computed, nil
}

// peers is an in-memory cluster: the server, the client and one peer pod per policy, indexed
// by label as the node agent's pod informer is.
type peers struct {
	pods    []*corev1.Pod
	byLabel map[string][]*corev1.Pod
	pols    []*networkingv1.NetworkPolicy
}

func (p peers) PodsLabelled(_, k, v string) []*corev1.Pod { return p.byLabel[k+"="+v] }

func (p peers) Policies(string) []*networkingv1.NetworkPolicy { return p.pols }
func (p peers) PodsIn(string) []*corev1.Pod                   { return p.pods }
func (p peers) Namespaces() []*corev1.Namespace               { return nil }
func (p peers) Namespace(string) *corev1.Namespace            { return nil }

func workload(count int) peers {
	pod := func(name string, ip netip.Addr) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name, Labels: map[string]string{"peer": name}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip.String()}}
	}
	src := peers{pods: []*corev1.Pod{pod("server", server), pod("client", client)}, byLabel: map[string][]*corev1.Pod{}}
	ip := netip.MustParseAddr("10.78.0.0")
	for i := range count {
		ip = ip.Next()
		name := "peer-" + strconv.Itoa(i)
		src.pods = append(src.pods, pod(name, ip))
		from := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"peer": name}}}}
		ports := []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(int32(10000 + i)))}}
		if i == 0 {
			from = append(from, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"peer": "client"}}})
			ports = append(ports, networkingv1.NetworkPolicyPort{Port: ptr(intstr.FromInt32(port))})
		}
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"peer": "server"}},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: from, Ports: ports}},
		}}
		defaults.Default(np)
		src.pols = append(src.pols, np)
	}
	for _, p := range src.pods {
		src.byLabel["peer="+p.Name] = append(src.byLabel["peer="+p.Name], p)
	}
	return src
}

func ptr[T any](v T) *T { return &v }
