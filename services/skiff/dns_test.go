package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// `skiff dns` joins a control plane's NATS and answers its Services' names, with no node.
func TestDNSCommandAnswersServices(t *testing.T) {
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) { c.NATSPort = -1 })
	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	obj, err := cp.Client.Create(context.Background(), svc)
	if err != nil {
		t.Fatal(err)
	}
	ip := obj.(*corev1.Service).Spec.ClusterIP
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	root := newRoot()
	root.SetOut(out)
	root.SetErr(out)
	root.SetArgs([]string{"dns", "--listen", "127.0.0.1:0", "--nats-url", cp.NATS.ClientURL(), "--node-name", "dns-test"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("skiff dns: %v", err)
		}
	})
	var addr string
	testutil.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		_, rest, ok := strings.Cut(out.String(), "skiff dns serving on ")
		if !ok {
			return fmt.Errorf("not serving yet: %s", out.String())
		}
		addr = strings.TrimSpace(rest)
		return nil
	})
	m, err := dns.Exchange(new(dns.Msg).SetQuestion("web.default.svc.cluster.local.", dns.TypeA), addr)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != ip {
		t.Fatalf("answer %v, want A %s", m.Answer, ip)
	}
}

func TestDNSCommandFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dns", "--listen", "localhost:53"}, "--listen"},
		{[]string{"dns", "--listen", "127.0.0.1"}, "--listen"},
		{[]string{"dns", "--upstream", "10.0.0.1,dns.example"}, "--upstream \"dns.example\""},
		{[]string{"dns", "--upstream", "10.0.0.1:x"}, "--upstream"},
	} {
		root := newRoot()
		root.SetArgs(tc.args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want an error naming %s, got %v", tc.args, tc.want, err)
		}
	}
}

// `skiff dns` collects at GOGC=50 unless the environment sets GOGC, which stays in force.
func TestDNSGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	debug.SetGCPercent(100)
	dnsGC()
	if got := debug.SetGCPercent(100); got != dnsGCPercent {
		t.Fatalf("GOGC unset: percent %d, want %d", got, dnsGCPercent)
	}
	t.Setenv("GOGC", "80")
	debug.SetGCPercent(80) // as the runtime does at start from the environment
	dnsGC()
	if got := debug.SetGCPercent(100); got != 80 {
		t.Fatalf("GOGC=80: percent %d, want 80 kept", got)
	}
}
