package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// protobufFramesOf opens a protobuf watch and returns a function reading its next n frames
// (each a raw protobuf metav1.WatchEvent) with apimachinery's frame reader.
func protobufFramesOf(t *testing.T, url string) func(n int) [][]byte {
	t.Helper()
	return protobufFramesAccepting(t, url, schemas.ContentTypeProtobuf+", application/json")
}

// protobufFramesAccepting is protobufFramesOf with the given Accept.
func protobufFramesAccepting(t *testing.T, url, accept string) func(n int) [][]byte {
	t.Helper()
	resp, err := watchResponse(t, url, accept)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != contentTypeProtobufWatch {
		t.Fatalf("watch %s: Content-Type %q, want %q", url, ct, contentTypeProtobufWatch)
	}
	r := protobuf.LengthDelimitedFramer.NewFrameReader(resp.Body)
	return func(n int) [][]byte {
		t.Helper()
		var out [][]byte
		for range n {
			buf := make([]byte, 64<<10)
			m, err := r.Read(buf)
			if err != nil {
				t.Fatalf("watch %s after %d frames: %v", url, len(out), err)
			}
			out = append(out, buf[:m])
		}
		return out
	}
}

// Two protobuf watchers of an event get the same frame, an encoding of the event's object
// made once for both (and once more, in JSON, for a JSON watcher of the same events), which
// decodes to the object as stored.
func TestProtobufWatchersShareEachEncodedEvent(t *testing.T) {
	s, hs, l := newTestServer(t, statelog.Config{})
	const path = "/api/v1/namespaces/default/configmaps"
	from := fmt.Sprintf("%s%s?watch=1&resourceVersion=%d", hs.URL, path, l.Rev())
	a, b := protobufFramesOf(t, from), protobufFramesOf(t, from)
	js := watchLines(t, from)
	encodes0 := s.events.encodes.Load()

	cm := func(name, v string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"},"data":{"k":"` + v + `"}}`
	}
	var revs []string
	revs = append(revs, rvOf(call(t, "POST", hs.URL+path, cm("one", "1"), 201)))
	revs = append(revs, rvOf(call(t, "PUT", hs.URL+path+"/one", cm("one", "2"), 200)))
	call(t, "DELETE", hs.URL+path+"/one", "", 200)
	types := []watch.EventType{watch.Added, watch.Modified, watch.Deleted}

	fa, fb := a(len(types)), b(len(types))
	js(len(types))
	for i, typ := range types {
		if !bytes.Equal(fa[i], fb[i]) {
			t.Fatalf("event %d: the watchers got different frames", i)
		}
		var ev metav1.WatchEvent
		if err := ev.Unmarshal(fa[i]); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		var got corev1.ConfigMap
		if err := schemas.UnmarshalProtobuf(ev.Object.Raw, corev1.SchemeGroupVersion.WithKind("ConfigMap"), false, &got); err != nil {
			t.Fatalf("event %d: the object is not a ConfigMap's protobuf envelope: %v", i, err)
		}
		if ev.Type != string(typ) || got.Name != "one" || (i < 2 && (got.Data["k"] != fmt.Sprint(i+1) || got.ResourceVersion != revs[i])) {
			t.Fatalf("event %d: %s %+v, want %s of one at %v", i, ev.Type, got, typ, revs)
		}
	}
	if got := s.events.encodes.Load() - encodes0; got != int64(2*len(types)) {
		t.Fatalf("%d object encodings for %d events, 2 protobuf watchers and 1 JSON, want one per event and format", got, len(types))
	}
}

// A protobuf watch from a revision older than the kept history gets the 410 as an ERROR
// event in protobuf, which client-go surfaces as Expired (its reflector then relists).
func TestProtobufWatchOlderThanTheKeptHistoryIsGone(t *testing.T) {
	_, hs, l := newTestServer(t, statelog.Config{HistoryBytes: 8 << 10})
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: hs.URL, ContentConfig: rest.ContentConfig{ContentType: schemas.ContentTypeProtobuf}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cms := cs.CoreV1().ConfigMaps("default")
	first, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hb"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hb"}, Data: map[string]string{"n": fmt.Sprint(i), "pad": strings.Repeat("x", 500)}}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if l.OldestWatchRev() <= 1 {
		t.Fatal("the history kept everything: the test proves nothing")
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		err := apierrors.FromObject(ev.Object)
		if ev.Type != watch.Error || !apierrors.IsResourceExpired(err) || !strings.Contains(err.Error(), "too old resource version: "+first.ResourceVersion) {
			t.Fatalf("watch from %s: %s %#v", first.ResourceVersion, ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no event")
	}
}

// Every built-in kind with protobuf has a typed list that a protobuf list answer fills.
func TestEveryProtobufKindListsInProtobuf(t *testing.T) {
	for _, k := range schemas.Kinds() {
		if !schemas.HasProtobuf(k) || k.ListKind == "" {
			continue
		}
		obj := k.New()
		setTypeMeta(obj, k)
		mustMeta(obj).SetName("x")
		list, err := typedList(k, []runtime.Object{obj}, metav1.ListMeta{ResourceVersion: "7", Continue: "c"})
		if err != nil {
			t.Errorf("%s: %v", k.ListKind, err)
			continue
		}
		data, err := encodeIn(list, true)
		if err != nil {
			t.Errorf("%s: %v", k.ListKind, err)
			continue
		}
		got, _, err := protobuf.NewSerializer(schemas.Scheme, schemas.Scheme).Decode(data, nil, nil)
		if err != nil {
			t.Errorf("%s: %v", k.ListKind, err)
			continue
		}
		items, _ := meta.ExtractList(got)
		la, _ := meta.ListAccessor(got)
		if len(items) != 1 || mustMeta(items[0]).GetName() != "x" || la.GetResourceVersion() != "7" || la.GetContinue() != "c" {
			t.Errorf("%s: decoded as %#v", k.ListKind, got)
		}
	}
}
