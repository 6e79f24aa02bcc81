package apiserver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/actors/nodeapi"
	"github.com/skiff-sh/skiff/bus/rpc"
)

// metrics.k8s.io joins what the nodes answer with the pods and nodes of the state: namespaces,
// label selectors and get by name as metrics-server serves them. The node here is a NATS
// responder with fixed figures; the e2e test reads a real node's cgroups.
func TestResourceMetricsAPI(t *testing.T) {
	a, cp := newAPI(t)
	res := a.mustDo(200, "GET", "/apis/metrics.k8s.io/v1beta1", "", "")
	if b, _ := json.Marshal(res["resources"]); !strings.Contains(string(b), `"kind":"NodeMetrics"`) || !strings.Contains(string(b), `"kind":"PodMetrics"`) {
		t.Fatalf("discovery: %s", b)
	}
	a.mustDo(201, "POST", "/api/v1/nodes", "application/json", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"zone":"a"}}}`)
	for _, p := range []struct{ ns, name, app string }{{"default", "web-1", "web"}, {"default", "db-1", "db"}, {"kube-system", "web-2", "web"}} {
		a.mustDo(201, "POST", "/api/v1/namespaces/"+p.ns+"/pods", "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"`+p.name+
			`","labels":{"app":"`+p.app+`"}},"spec":{"nodeName":"n1","containers":[{"name":"c","image":"img"}]}}`)
	}
	uids := map[string]string{}
	for _, p := range []struct{ ns, name string }{{"default", "web-1"}, {"default", "db-1"}, {"kube-system", "web-2"}} {
		path := "/api/v1/namespaces/" + p.ns + "/pods/" + p.name
		pod := a.mustDo(200, "GET", path, "", "")
		pod["status"] = map[string]any{"phase": "Running"}
		body, _ := json.Marshal(pod)
		a.mustDo(200, "PUT", path+"/status", "application/json", string(body))
		uids[p.name] = get(pod, "metadata", "uid").(string)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	usage := func(cpu, mem uint64) nodeapi.Usage {
		return nodeapi.Usage{Timestamp: at, Window: 10 * time.Second, CPUNanoCores: cpu, MemoryBytes: mem}
	}
	node := usage(1_500_000_000, 2<<30)
	reply := nodeapi.MetricsReply{Node: &node, Containers: []nodeapi.ContainerUsage{
		{PodUID: uids["web-1"], Name: "c", Usage: usage(250_000_000, 64<<20)},
		{PodUID: uids["db-1"], Name: "c", Usage: usage(5_000_000, 128<<20)},
		{PodUID: uids["web-2"], Name: "c", Usage: usage(1_000_000, 1<<20)},
	}}
	sub, err := rpc.Serve(cp.Conn, nodeapi.MetricsSubject("n1"), "", nodeapi.Handle(func(context.Context, nodeapi.MetricsRequest) (nodeapi.MetricsReply, error) {
		return reply, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	_ = cp.Conn.Flush()

	n := a.mustDo(200, "GET", "/apis/metrics.k8s.io/v1beta1/nodes/n1", "", "")
	if get(n, "kind") != "NodeMetrics" || get(n, "usage", "cpu") != "1500m" || get(n, "usage", "memory") != "2Gi" || get(n, "window") != "10s" ||
		get(n, "metadata", "labels", "zone") != "a" {
		t.Fatalf("node metrics: %v", n)
	}
	list := a.mustDo(200, "GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dweb", "", "")
	items, _ := list["items"].([]any)
	if get(list, "kind") != "PodMetricsList" || len(items) != 1 {
		t.Fatalf("pods app=web in default: %v", list)
	}
	web := items[0].(map[string]any)
	c := web["containers"].([]any)[0].(map[string]any)
	if get(web, "metadata", "name") != "web-1" || get(c, "name") != "c" || get(c, "usage", "cpu") != "250m" || get(c, "usage", "memory") != "64Mi" {
		t.Fatalf("web-1: %v", web)
	}
	if all := a.mustDo(200, "GET", "/apis/metrics.k8s.io/v1beta1/pods", "", ""); len(all["items"].([]any)) != 3 {
		t.Fatalf("pods in all namespaces: %v", all)
	}
	_, out := a.do("GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/nope", "", "")
	if msg, _ := out["message"].(string); !strings.Contains(msg, `podmetrics.metrics.k8s.io "nope" not found`) {
		t.Fatalf("missing pod: %v", out)
	}
	if code, _ := a.do("GET", "/apis/metrics.k8s.io/v1beta1/nodes?watch=true", "", ""); code != 405 {
		t.Fatalf("watch: %d, want 405", code)
	}
	// A node that does not answer is left out, as metrics-server leaves out an unscraped one.
	_ = sub.Unsubscribe()
	if l := a.mustDo(200, "GET", "/apis/metrics.k8s.io/v1beta1/nodes", "", ""); len(l["items"].([]any)) != 0 {
		t.Fatalf("silent node listed: %v", l)
	}
}
