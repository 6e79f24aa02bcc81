package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/skiff-sh/skiff/bus/natsserver/natsservertest"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// newTestServer runs the apiserver's handler alone over a real embedded JetStream and log.
func newTestServer(t *testing.T, cfg statelog.Config) (*Server, *httptest.Server, *statelog.Log) {
	t.Helper()
	_, nc := natsservertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.Memory = true
	l, err := statelog.Open(ctx, nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	s, err := New(Options{Log: l, CheckSharedMutations: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureDefaultNamespaces(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return s, hs, l
}

// do sends one request and returns the status and the decoded body.
func do(method, url, body string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return resp.StatusCode, out, err
}

// call is do that wants the given status.
func call(t *testing.T, method, url, body string, want int) map[string]any {
	t.Helper()
	code, out, err := do(method, url, body)
	if err != nil || code != want {
		t.Fatalf("%s %s: %d, want %d: %v %v", method, url, code, want, out, err)
	}
	return out
}

// rvOf is a returned object's metadata.resourceVersion.
func rvOf(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	rv, _ := meta["resourceVersion"].(string)
	return rv
}

// watchResponse opens a watch with the given Accept ("" sends none).
func watchResponse(t *testing.T, url, accept string) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, nil
}

// openWatch opens a watch and returns a function reading its next raw line.
func openWatch(t *testing.T, url string) (func() ([]byte, error), error) {
	return openWatchAccepting(t, url, "")
}

// openWatchAccepting is openWatch with the given Accept.
func openWatchAccepting(t *testing.T, url, accept string) (func() ([]byte, error), error) {
	resp, err := watchResponse(t, url, accept)
	if err != nil {
		return nil, err
	}
	r := bufio.NewReader(resp.Body)
	return func() ([]byte, error) { return r.ReadBytes('\n') }, nil
}

// watchLines opens a watch and returns a function reading its next n raw lines.
func watchLines(t *testing.T, url string) func(n int) [][]byte {
	t.Helper()
	return jsonLinesAccepting(t, url, "")
}

// jsonLinesAccepting opens a JSON watch with the given Accept and returns a function reading
// its next n lines.
func jsonLinesAccepting(t *testing.T, url, accept string) func(n int) [][]byte {
	t.Helper()
	next, err := openWatchAccepting(t, url, accept)
	if err != nil {
		t.Fatal(err)
	}
	return func(n int) [][]byte {
		t.Helper()
		var out [][]byte
		for range n {
			line, err := next()
			if err != nil {
				t.Fatalf("watch %s after %d lines: %v", url, len(out), err)
			}
			out = append(out, line)
		}
		return out
	}
}

// perWatcherLine is how a watch line was made before events were shared: each watcher decoded
// the stored value and encoded the object and the event itself.
func perWatcherLine(t *testing.T, k *schemas.Kind, typ watch.EventType, value []byte, rev uint64) []byte {
	t.Helper()
	obj, err := decodeStored(k, value, rev)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	line, err := json.Marshal(struct {
		Type   watch.EventType `json:"type"`
		Object json.RawMessage `json:"object"`
	}{typ, data})
	if err != nil {
		t.Fatal(err)
	}
	return append(line, '\n')
}

// Every watcher of an event gets the same bytes, byte for byte what a watcher encoding it
// alone wrote, and the object is encoded once however many watch; label and field selectors
// still filter per watcher, turning updates into ADDED and DELETED where objects move in
// and out.
func TestWatchersShareEachEncodedEvent(t *testing.T) {
	s, hs, l := newTestServer(t, statelog.Config{})
	k, _ := schemas.ByResource("", "v1", "configmaps")
	const path = "/api/v1/namespaces/default/configmaps"
	rev := l.Rev()
	from := fmt.Sprintf("%s%s?watch=1&resourceVersion=%d", hs.URL, path, rev)
	a, b := watchLines(t, from), watchLines(t, from)
	labelled := watchLines(t, from+"&labelSelector=app%3Dweb")
	named := watchLines(t, from+"&fieldSelector=metadata.name%3Dtwo")
	logged, err := l.Watch(context.Background(), schemas.StoragePrefix(k, "default"), statelog.WatchOptions{FromRev: rev})
	if err != nil {
		t.Fatal(err)
	}
	defer logged.Stop()
	encodes0 := s.events.encodes.Load()

	cm := func(name, labels string) string {
		// HTML characters: json.Marshal escapes them, and the shared line must too.
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"` + labels + `},"data":{"k":"<v&>"}}`
	}
	call(t, "POST", hs.URL+path, cm("one", ""), 201)
	call(t, "POST", hs.URL+path, cm("two", `,"labels":{"app":"web"}`), 201)
	call(t, "PUT", hs.URL+path+"/one", cm("one", `,"labels":{"app":"web"}`), 200)
	call(t, "DELETE", hs.URL+path+"/two", "", 200)
	types := []watch.EventType{watch.Added, watch.Added, watch.Modified, watch.Deleted}

	var want [][]byte
	for i, typ := range types {
		var ev statelog.Event
		select {
		case ev = <-logged.Events():
		case <-time.After(10 * time.Second):
			t.Fatalf("no log event %d", i)
		}
		want = append(want, perWatcherLine(t, k, typ, ev.Value, ev.Rev))
	}
	la, lb := a(len(types)), b(len(types))
	for i := range types {
		if !bytes.Equal(la[i], want[i]) || !bytes.Equal(lb[i], want[i]) {
			t.Fatalf("event %d:\n%s\n%s\nwant what one watcher wrote alone:\n%s", i, la[i], lb[i], want[i])
		}
	}
	// app=web: "two" enters at its create, "one" by its update (ADDED), "two" leaves by its delete.
	ll := labelled(3)
	for i, w := range [][]byte{want[1], bytes.Replace(want[2], []byte(`"MODIFIED"`), []byte(`"ADDED"`), 1), want[3]} {
		if !bytes.Equal(ll[i], w) {
			t.Fatalf("label selector event %d:\n%s\nwant\n%s", i, ll[i], w)
		}
	}
	ln := named(2)
	if !bytes.Equal(ln[0], want[1]) || !bytes.Equal(ln[1], want[3]) {
		t.Fatalf("field selector events:\n%s%s\nwant\n%s%s", ln[0], ln[1], want[1], want[3])
	}
	if got := s.events.encodes.Load() - encodes0; got != int64(len(types)) {
		t.Fatalf("%d object encodings for %d events and 4 watchers, want one per event", got, len(types))
	}
}

// The shared cache keeps to its byte bound, dropping the oldest entries.
func TestSharedEventsEvictOldestOverTheBound(t *testing.T) {
	k, _ := schemas.ByResource("", "v1", "configmaps")
	value := []byte(`{"metadata":{"name":"x"},"data":{"k":"` + strings.Repeat("v", 100) + `"}}`)
	c := newSharedEvents(3 * sharedCost(len(value))) // room for three
	first, err := c.object(k, value, 1)
	if err != nil {
		t.Fatal(err)
	}
	for rev := uint64(2); rev <= 4; rev++ {
		if _, err := c.object(k, value, rev); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.entries) != 3 || c.bytes > c.limit {
		t.Fatalf("%d entries, %d bytes kept; want 3 within %d", len(c.entries), c.bytes, c.limit)
	}
	if again, _ := c.object(k, value, 1); again == first {
		t.Fatal("the oldest entry survived past the bound")
	}
	if again, _ := c.object(k, value, 4); again.obj == nil || mustMeta(again.obj).GetResourceVersion() != "4" {
		t.Fatalf("entry for rev 4: %+v", again)
	}
}

// A watch from a revision older than the history the log keeps (bounded by size, here a few
// events) is 410 Gone with "too old resource version", as kube-apiserver answers, and the
// client relists; a watch from the oldest revision kept still works.
func TestWatchOlderThanTheKeptHistoryIsGone(t *testing.T) {
	_, hs, l := newTestServer(t, statelog.Config{HistoryBytes: 8 << 10})
	const path = "/api/v1/namespaces/default/configmaps"
	out := call(t, "POST", hs.URL+path, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"hb"},"data":{"n":"0"}}`, 201)
	first := rvOf(out)
	for i := range 30 {
		call(t, "PUT", hs.URL+path+"/hb", fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"hb"},"data":{"n":"%d","pad":"%s"}}`, i+1, strings.Repeat("x", 500)), 200)
	}
	if l.OldestWatchRev() <= 1 {
		t.Fatal("the history kept everything: the test proves nothing")
	}
	line := watchLines(t, hs.URL+path+"?watch=1&resourceVersion="+first)(1)[0]
	var ev struct {
		Type   string
		Object struct {
			Code    int
			Reason  string
			Message string
		}
	}
	if err := json.Unmarshal(line, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "ERROR" || ev.Object.Code != http.StatusGone || ev.Object.Reason != "Expired" ||
		!strings.Contains(ev.Object.Message, "too old resource version: "+first) {
		t.Fatalf("watch from %s: %s", first, line)
	}
	oldest := l.OldestWatchRev()
	if got := watchLines(t, fmt.Sprintf("%s%s?watch=1&resourceVersion=%d", hs.URL, path, oldest))(1)[0]; !bytes.Contains(got, []byte(`"MODIFIED"`)) {
		t.Fatalf("watch from the oldest kept revision %d: %s", oldest, got)
	}
}
