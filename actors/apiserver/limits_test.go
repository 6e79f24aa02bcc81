package apiserver_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/apiserver"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

const (
	cmPath        = "/api/v1/namespaces/default/configmaps"
	jsonPatchType = "application/json-patch+json"
)

// bindEdit gives bob the edit ClusterRole in the default namespace.
func bindEdit(a secureAPI) {
	a.admin().mustDo(http.StatusCreated, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"bob-edit"},
		"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"edit"},
		"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"bob"}]}`)
	grantedEventually(a.t, a.as("bob-token"), "GET", cmPath, "", http.StatusOK)
}

// copyBomb is the JSON patch of issue 13: each op appends the finalizers to themselves, so the
// list doubles per op (2^40 copies unbounded).
func copyBomb() string {
	op := `{"op":"copy","from":"/metadata/finalizers","path":"/metadata/finalizers/-"}`
	return "[" + strings.Repeat(op+",", 39) + op + "]"
}

func TestPatchCopyBombIsBounded(t *testing.T) {
	a, cp := newSecureAPI(t)
	bindEdit(a)
	bob := a.as("bob-token")
	bob.mustDo(http.StatusCreated, "POST", cmPath, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bomb","finalizers":["example.com/f"]}}`)

	bomb := copyBomb()
	runtime.GC()
	base := heapBytes()
	rev := cp.Log.Rev()
	peak := sampleHeapPeak()
	start := time.Now()
	code, out, _ := bob.send("PATCH", cmPath+"/bomb", jsonPatchType, bomb)
	took := time.Since(start)
	growth := int64(peak()) - int64(base)
	t.Logf("copy bomb (%d bytes): %d in %v; heap %d MB before, peak growth %d MB", len(bomb), code, took, base>>20, growth>>20)
	if code != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(out["message"]), "the accumulated size increase of copy is") {
		t.Fatalf("copy bomb: got %d %v, want 422 naming the copy limit", code, out["message"])
	}
	if took > patchAnswerWithin {
		t.Errorf("copy bomb answered after %v, want < %v", took, patchAnswerWithin)
	}
	if growth > 50<<20 {
		t.Errorf("the heap grew by %d MB during the patch, want < 50 MB", growth>>20)
	}
	if cp.Log.Rev() != rev {
		t.Errorf("the refused patch wrote: log %d -> %d", rev, cp.Log.Rev())
	}
	// A normal patch by the same user still works.
	code, out, _ = bob.send("PATCH", cmPath+"/bomb", jsonPatchType, `[{"op":"add","path":"/data","value":{"k":"v"}}]`)
	if code != http.StatusOK || get(out, "data", "k") != "v" {
		t.Fatalf("normal JSON patch: %d %v", code, out)
	}
}

// heapBytes is the bytes of live and not yet swept heap objects: the in-process server's heap.
func heapBytes() uint64 {
	m := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(m)
	return m[0].Value.Uint64()
}

// sampleHeapPeak samples heapBytes every millisecond until the returned func is called, which
// returns the highest sample.
func sampleHeapPeak() func() uint64 {
	done, result := make(chan struct{}), make(chan uint64)
	go func() {
		peak := heapBytes()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				peak = max(peak, heapBytes())
			case <-done:
				result <- max(peak, heapBytes())
				return
			}
		}
	}()
	return func() uint64 { close(done); return <-result }
}

func TestPatchOperationCountAndResultSizeAreLimited(t *testing.T) {
	a, cp := newSecureAPI(t)
	admin := a.admin()
	admin.mustDo(http.StatusCreated, "POST", cmPath, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"big":"`+strings.Repeat("x", 900<<10)+`"}}`)

	op := `{"op":"test","path":"/metadata/name","value":"c"}`
	tooMany := "[" + strings.Repeat(op+",", 10000) + op + "]"
	code, out, _ := admin.send("PATCH", cmPath+"/c", jsonPatchType, tooMany)
	if want := "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"; code != http.StatusRequestEntityTooLarge || out["message"] != want {
		t.Errorf("10001 operations: got %d %q, want 413 %q", code, out["message"], want)
	}

	// Each body is within the limit; the patched object is not, whichever the patch type.
	more := strings.Repeat("y", 2300<<10)
	for ct, body := range map[string]string{
		"application/merge-patch+json":           `{"data":{"more":"` + more + `"}}`,
		"application/strategic-merge-patch+json": `{"data":{"more":"` + more + `"}}`,
		jsonPatchType:                            `[{"op":"add","path":"/data/more","value":"` + more + `"}]`,
	} {
		rev := cp.Log.Rev()
		code, out, _ := admin.send("PATCH", cmPath+"/c", ct, body)
		if code != http.StatusRequestEntityTooLarge || !strings.Contains(fmt.Sprint(out["message"]), "the patched object is larger than the request body limit") {
			t.Errorf("%s growing the object past the limit: got %d %v, want 413", ct, code, out["message"])
		}
		if cp.Log.Rev() != rev {
			t.Errorf("%s: the refused patch wrote", ct)
		}
	}
}

// trickled is how the server answered a request whose body never finished.
type trickled struct {
	code   int
	closed bool // the server hung up after answering
	after  time.Duration
}

// trickle starts a request as token with the headers and the first sent bytes of a body of
// size bytes, and never sends the rest; the answer arrives on out.
func trickle(t *testing.T, cp *controlplane.ControlPlane, token string, size, sent int, out chan<- trickled) {
	t.Helper()
	conn, err := tls.Dial("tcp", strings.TrimPrefix(cp.URL(), "https://"), &tls.Config{RootCAs: cp.PKI().CertPool()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	start := time.Now()
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", cmPath, token, size)
	if _, err := io.WriteString(conn, head+strings.Repeat(" ", sent)); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			out <- trickled{after: time.Since(start)}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_, err = br.ReadByte()
		out <- trickled{code: resp.StatusCode, closed: errors.Is(err, io.EOF), after: time.Since(start)}
	}()
}

// TestTricklingBodiesAreCutOffAndSpendOnlyTheirUsersSeats: a user's bodies that never finish
// hold at most its in-flight seats (the rest get 429 at once), are cut off with 408 and a
// closed connection after the body timeout, and meanwhile other users and nodes are served.
func TestTricklingBodiesAreCutOffAndSpendOnlyTheirUsersSeats(t *testing.T) {
	const bodyTimeout, seats, conns = 4 * time.Second, 8, 12
	a, cp := newSecureAPI(t, func(c *controlplane.Config) {
		c.APITimeouts.BodyRead = bodyTimeout
		c.APIAuth.ClientInflight = seats
	})
	bindEdit(a)
	answers := make(chan trickled, conns)
	for i := 0; i < conns; i++ {
		trickle(t, cp, "bob-token", 3<<20, 64<<10, answers)
	}
	// The requests beyond bob's seats are refused at once; the others are still held.
	for i := 0; i < conns-seats; i++ {
		if r := <-answers; r.code != http.StatusTooManyRequests {
			t.Fatalf("with %d seats, answer %d of %d trickling requests: %d after %v, want 429 at once", seats, i+1, conns, r.code, r.after)
		}
	}
	code, out, h := a.as("bob-token").do("GET", cmPath, "")
	if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" || out["message"] != "Too many requests, please try again later." {
		t.Errorf("bob with every seat held: %d Retry-After %q %v", code, h.Get("Retry-After"), out["message"])
	}
	a.as("alice-token").mustDo(http.StatusOK, "GET", "/api", "")
	a.as("node-a-token").mustDo(http.StatusCreated, "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
		`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"a","namespace":"kube-node-lease"},"spec":{"holderIdentity":"a"}}`)

	for i := 0; i < seats; i++ {
		r := <-answers
		t.Logf("trickling body: %d after %v, connection closed: %v", r.code, r.after.Round(time.Millisecond), r.closed)
		if r.code != http.StatusRequestTimeout || !r.closed {
			t.Errorf("trickling body: got %d (closed %v), want 408 and the connection closed", r.code, r.closed)
		}
		if r.after < bodyTimeout || r.after > bodyTimeout+5*time.Second {
			t.Errorf("trickling body cut off after %v, want about %v", r.after, bodyTimeout)
		}
	}
	a.as("bob-token").mustDo(http.StatusOK, "GET", cmPath, "") // the seats are back
}

// TestFloodingUserIsLimitedOthersAndNodesAreNot: with the default budgets, a user sending as
// fast as it can gets 429s, while another user and a node (its heartbeat and its own budget)
// are served.
func TestFloodingUserIsLimitedOthersAndNodesAreNot(t *testing.T) {
	a, _ := newSecureAPI(t)
	bob := a.as("bob-token")
	var limited http.Header
	for i := 0; i < 20*apiserver.DefaultClientBurst && limited == nil; i++ {
		switch code, out, h := bob.do("GET", "/api", ""); code {
		case http.StatusOK:
		case http.StatusTooManyRequests:
			if out["message"] != "Too many requests, please try again later." {
				t.Errorf("429 message %q", out["message"])
			}
			limited = h
		default:
			t.Fatalf("flood request %d: %d %v", i, code, out)
		}
	}
	if limited == nil || limited.Get("Retry-After") == "" {
		t.Fatalf("%d requests as fast as one client sends them were never limited (or without Retry-After)", 20*apiserver.DefaultClientBurst)
	}
	a.as("alice-token").mustDo(http.StatusOK, "GET", "/api", "")
	na := a.as("node-a-token")
	na.mustDo(http.StatusCreated, "POST", "/api/v1/nodes", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}}`)
	na.mustDo(http.StatusOK, "PATCH", "/api/v1/nodes/a/status", `{"status":{"phase":"Running"}}`)
	na.mustDo(http.StatusOK, "GET", "/api/v1/namespaces/default/pods", "")
}

// TestWatchOutlivesTimeouts: a watch runs on well past every HTTP timeout and still delivers.
func TestWatchOutlivesTimeouts(t *testing.T) {
	const timeout = 300 * time.Millisecond
	cp := testutil.StartControlPlane(t, apiOnly, func(c *controlplane.Config) {
		c.APITimeouts = apiserver.Timeouts{ReadHeader: timeout, BodyRead: timeout, Idle: timeout}
		c.Bookmarks = 100 * time.Millisecond
	})
	a := api{t: t, base: cp.URL()}
	ch := watchEvents(t, a.base+cmPath+"?watch=1&allowWatchBookmarks=true")
	start := time.Now()
	for time.Since(start) < 5*timeout { // bookmarks mark the time passing on the stream
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the watch ended after %v", time.Since(start))
			}
			if !strings.HasPrefix(ev, "BOOKMARK") {
				t.Fatalf("unexpected event %q", ev)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no bookmark for 10s")
		}
	}
	a.mustDo(http.StatusCreated, "POST", cmPath, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"late"}}`)
	for ev := range ch {
		if ev == "ADDED late" {
			return
		}
		if !strings.HasPrefix(ev, "BOOKMARK") {
			t.Fatalf("unexpected event %q", ev)
		}
	}
	t.Fatalf("the watch ended after %v without the new object", time.Since(start))
}

// TestStrategicMergePatchCostIsBounded: strategic merge matches list elements pair by pair, so
// a patch whose lists would cost too many comparisons is refused before the work starts.
func TestStrategicMergePatchCostIsBounded(t *testing.T) {
	a, cp := newSecureAPI(t)
	admin := a.admin()
	containers := func(prefix string, n int) string {
		cs := make([]string, n)
		for i := range cs {
			cs[i] = fmt.Sprintf(`{"name":"%s%d","image":"img"}`, prefix, i)
		}
		return `[` + strings.Join(cs, ",") + `]`
	}
	admin.mustDo(http.StatusCreated, "POST", podsPath, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"wide"},"spec":{"containers":`+containers("c", 3000)+`}}`)
	rev := cp.Log.Rev()
	start := time.Now()
	code, out, _ := admin.send("PATCH", podsPath+"/wide", "application/strategic-merge-patch+json", `{"spec":{"containers":`+containers("d", 3000)+`}}`)
	took := time.Since(start)
	if code != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(out["message"]), "would match up to 9000000 list elements") {
		t.Fatalf("3000 containers merged into 3000: got %d %v, want 422 naming the cost", code, out["message"])
	}
	if took > patchAnswerWithin || cp.Log.Rev() != rev {
		t.Errorf("refused after %v (want < %v); log %d -> %d", took, patchAnswerWithin, rev, cp.Log.Rev())
	}
	got := admin.mustDo(http.StatusOK, "PATCH", podsPath+"/wide", `{"metadata":{"labels":{"ok":"yes"}}}`) // merge patch
	if get(got, "metadata", "labels", "ok") != "yes" {
		t.Fatalf("a small patch after it: %v", got["metadata"])
	}
	code, out, _ = admin.send("PATCH", podsPath+"/wide", "application/strategic-merge-patch+json", `{"metadata":{"labels":{"smp":"yes"}}}`)
	if code != http.StatusOK || get(out, "metadata", "labels", "smp") != "yes" {
		t.Fatalf("a small strategic merge patch: %d %v", code, out["message"])
	}
}

// TestClientWaitsOutThrottling: Skiff's API client, like client-go, sends a request refused
// with 429 again after the Retry-After the server named.
func TestClientWaitsOutThrottling(t *testing.T) {
	a, _ := newSecureAPI(t, func(c *controlplane.Config) { c.APIAuth.ClientQPS, c.APIAuth.ClientBurst = 2, 1 })
	c := &apiclient.Client{T: apiclient.HTTP{Server: a.base, Client: a.c, Token: "alice-token"}}
	start := time.Now()
	for i := 0; i < 3; i++ {
		if _, err := c.Raw(context.Background(), "GET", "/api", "", nil); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	// The burst is one: the 2nd and 3rd each waited out a 429's Retry-After (1 s).
	if took := time.Since(start); took < 2*time.Second {
		t.Fatalf("3 requests at 2 QPS with a burst of 1 took %v: the 429s were not waited out", took)
	}
}
