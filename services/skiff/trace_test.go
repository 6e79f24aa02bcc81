package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/internal/spanstore"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

const webManifest = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: img}]}
`

// runCLI runs one skiff command against server and returns what it printed.
func runCLI(t *testing.T, server string, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(append([]string{"--server", server}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// What `skiff up` wires: spans into the store, the store on the apiserver's listener.
func startTracedControlPlane(t *testing.T) (*controlplane.ControlPlane, *spanstore.Store) {
	store := spanstore.New(spanstore.Options{})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(store))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) {
		c.Components = []string{"apiserver", "scheduler", "deployment", "replicaset"}
	})
	cp.API.Handle(spanstore.TracePath, store.Handler())
	cp.API.Handle(spanstore.OTLPPath, store.OTLPHandler())
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	n, err := cp.Client.Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	node := n.(*corev1.Node)
	node.Status = corev1.NodeStatus{Capacity: alloc, Allocatable: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	if _, err := cp.Client.UpdateStatus(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	return cp, store
}

// scrape reads the apiserver's /metrics into series -> value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// One `skiff apply` of a Deployment, seen three ways: the waterfall `skiff trace` draws from the
// span store, the metrics on /metrics, and the Events the controllers and scheduler record.
func TestApplyTraceMetricsAndEvents(t *testing.T) {
	// No kubeconfig of this machine's user may leak into the CLI runs.
	t.Setenv("SKIFF_DATA_DIR", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	cp, store := startTracedControlPlane(t)
	before := scrape(t, cp.URL())
	manifest := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(manifest, []byte(webManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	// The real CLI in its own process: its root span reaches the store over OTLP/HTTP.
	apply := exec.Command(testutil.BuildBinary(t, "./services/skiff"), "--server", cp.URL(), "apply", "-f", manifest)
	apply.Env = append(os.Environ(), "SKIFF_DATA_DIR="+t.TempDir(), "KUBECONFIG=")
	if out, err := apply.CombinedOutput(); err != nil || !strings.Contains(string(out), "created") {
		t.Fatalf("apply: %v: %s", err, out)
	}
	ctx := context.Background()

	// Both pods bound is when the scheduler has recorded both Scheduled events.
	t.Run("events", func(t *testing.T) {
		want := []struct {
			reason, kind string
			n            int
		}{{"ScalingReplicaSet", "Deployment", 1}, {"SuccessfulCreate", "ReplicaSet", 2}, {"Scheduled", "Pod", 2}}
		evKind, _ := schemas.ByResource("", "v1", "events")
		testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
			objs, _, err := cp.Client.List(ctx, evKind, "default", nil)
			if err != nil {
				return err
			}
			got := map[string]int{}
			for _, o := range objs {
				e := o.(*corev1.Event)
				got[e.Reason+"/"+e.InvolvedObject.Kind]++
			}
			for _, w := range want {
				if got[w.reason+"/"+w.kind] < w.n {
					return fmt.Errorf("want %d %s events about a %s; events: %v", w.n, w.reason, w.kind, got)
				}
			}
			return nil
		})
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("waterfall", func(t *testing.T) {
		// The journey in causal order: each operation's first row comes after the previous one's.
		journey := []struct{ component, op string }{
			{"cli", "skiff apply"},
			{"apiserver", "create deployments"},
			{"deployment-controller", "reconcile deployment-controller"},
			{"apiserver", "create replicasets"},
			{"replicaset-controller", "reconcile replicaset-controller"},
			{"apiserver", "create pods"},
			{"scheduler", "schedule pod"},
			{"apiserver", "create pods/binding"},
		}
		var out string
		testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
			var err error
			if out, err = runCLI(t, cp.URL(), "trace", "--last"); err != nil {
				return err
			}
			if !strings.Contains(out, "\nlongest wait: ") {
				return fmt.Errorf("no critical path summary:\n%s", out)
			}
			out, _, _ = strings.Cut(out, "\ncritical path") // the journey is the waterfall's
			pos := 0
			for _, j := range journey {
				i := rowIndex(out[pos:], j.component, j.op)
				if i < 0 {
					return fmt.Errorf("no %s row %q after offset %d:\n%s", j.component, j.op, pos, out)
				}
				pos += i
			}
			return nil
		})
		for _, row := range strings.Split(out, "\n") {
			if strings.Contains(row, "+-") {
				t.Errorf("negative start offset in row %q", row)
			}
		}
		byName, err := runCLI(t, cp.URL(), "trace", "deploy/web")
		if err != nil {
			t.Fatal(err)
		}
		if first := strings.SplitN(out, "\n", 2)[0]; !strings.HasPrefix(byName, first+"\n") {
			t.Errorf("trace deploy/web drew another trace than --last (%s):\n%s", first, byName)
		}
		t.Log("\n" + out)
	})

	t.Run("json", func(t *testing.T) {
		out, err := runCLI(t, cp.URL(), "trace", "deploy/web", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var res spanstore.Result
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("-o json: %v\n%s", err, out)
		}
		if len(res.Spans) < 8 {
			t.Fatalf("%d spans", len(res.Spans))
		}
		for _, s := range res.Spans {
			if s.TraceID != res.TraceID || s.End.Before(s.Start) || s.Start.Before(res.Spans[0].Start) {
				t.Errorf("span %+v out of its trace", s)
			}
		}
		if _, err := runCLI(t, cp.URL(), "trace", "deploy/nope"); err == nil || !strings.Contains(err.Error(), "no recent trace") {
			t.Errorf("trace of an untouched object: %v", err)
		}
		if _, err := runCLI(t, cp.URL(), "trace", "frobs/x"); err == nil || !strings.Contains(err.Error(), "frobs") {
			t.Errorf("trace of an unknown kind: %v", err)
		}
	})

	// A node agent's spans reach the store over its NATS API subject, through the apiserver.
	t.Run("agent spans", func(t *testing.T) {
		proc, err := apiServerSpans(ctx, apiclient.NATS{Conn: cp.Conn}, slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(proc))
		_, span := tp.Tracer("skiff/kubelet").Start(ctx, "sync pod")
		span.End()
		if err := tp.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		got := store.Trace(span.SpanContext().TraceID().String())
		if len(got) != 1 || got[0].Component() != "kubelet" || got[0].Name != "sync pod" {
			t.Fatalf("the store holds %+v", got)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		after := scrape(t, cp.URL())
		rose := func(series string) {
			t.Helper()
			if after[series] <= before[series] {
				t.Errorf("%s: %v before, %v after; want it to rise", series, before[series], after[series])
			}
		}
		rose(`skiff_apiserver_request_total{code="201",resource="deployments",verb="create"}`)
		rose(`skiff_apiserver_request_duration_seconds_count{code="201",resource="pods/binding",verb="create"}`)
		rose(`skiff_statelog_write_duration_seconds_count{op="put",result="ok"}`)
		rose(`skiff_statelog_watch_lag_seconds_count`)
		rose(`skiff_scheduler_schedule_attempts_total{result="scheduled"}`)
		rose(`skiff_controller_reconcile_duration_seconds_count{controller="deployment-controller",result="success"}`)
		for _, c := range []string{"deployment-controller", "replicaset-controller"} {
			if _, ok := after[`skiff_workqueue_depth{controller="`+c+`"}`]; !ok {
				t.Errorf("no work-queue depth for %s", c)
			}
		}
		if _, ok := after["go_goroutines"]; !ok {
			t.Error("no Go runtime metrics")
		}
	})
}

// rowIndex finds the first waterfall row with the component in its first column and the
// operation in the second; -1 if none.
func rowIndex(out, component, op string) int {
	at := 0
	for _, row := range strings.SplitAfter(out, "\n") {
		f := strings.Fields(row)
		if len(f) > 1 && f[0] == component && strings.Contains(row, " "+op+" ") {
			return at
		}
		at += len(row)
	}
	return -1
}
