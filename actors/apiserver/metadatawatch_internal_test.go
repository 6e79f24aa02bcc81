package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// Metadata watchers are formats of their own: two protobuf and two JSON metadata watchers of
// an event get the same bytes per format, the metadata encoded once per format (and the full
// object once more for a plain JSON watcher).
func TestMetadataWatchersShareEachEncodedEvent(t *testing.T) {
	s, hs, l := newTestServer(t, statelog.Config{})
	const path = "/api/v1/namespaces/default/configmaps"
	from := fmt.Sprintf("%s%s?watch=1&resourceVersion=%d", hs.URL, path, l.Rev())
	const metaPB = schemas.ContentTypeProtobuf + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	const metaJSON = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	pa, pb := protobufFramesAccepting(t, from, metaPB), protobufFramesAccepting(t, from, metaPB)
	ja, jb := jsonLinesAccepting(t, from, metaJSON), jsonLinesAccepting(t, from, metaJSON)
	plain := watchLines(t, from)
	encodes0 := s.events.encodes.Load()

	cm := func(v string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"one","labels":{"v":"` + v + `"}},"data":{"k":"secret-ish"}}`
	}
	call(t, "POST", hs.URL+path, cm("1"), 201)
	call(t, "PUT", hs.URL+path+"/one", cm("2"), 200)
	call(t, "DELETE", hs.URL+path+"/one", "", 200)
	types := []watch.EventType{watch.Added, watch.Modified, watch.Deleted}
	n := len(types)
	fa, fb, la, lb := pa(n), pb(n), ja(n), jb(n)
	plain(n)
	for i, typ := range types {
		if !bytes.Equal(fa[i], fb[i]) || !bytes.Equal(la[i], lb[i]) {
			t.Fatalf("event %d: watchers of one format got different bytes", i)
		}
		var ev metav1.WatchEvent
		if err := ev.Unmarshal(fa[i]); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		var got metav1.PartialObjectMetadata
		if err := schemas.UnmarshalProtobuf(ev.Object.Raw, metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata"), false, &got); err != nil {
			t.Fatalf("event %d: not a PartialObjectMetadata envelope: %v", i, err)
		}
		var line struct {
			Type   string                       `json:"type"`
			Object metav1.PartialObjectMetadata `json:"object"`
		}
		if err := json.Unmarshal(la[i], &line); err != nil || bytes.Contains(la[i], []byte("secret-ish")) {
			t.Fatalf("event %d: JSON line %s (%v)", i, la[i], err)
		}
		if ev.Type != string(typ) || got.Name != "one" || line.Type != string(typ) || line.Object.Kind != "PartialObjectMetadata" ||
			line.Object.APIVersion != "meta.k8s.io/v1" || line.Object.Labels["v"] != got.Labels["v"] {
			t.Fatalf("event %d: protobuf %s %+v, JSON %+v; want %s", i, ev.Type, got, line, typ)
		}
	}
	if got := s.events.encodes.Load() - encodes0; got != int64(3*n) {
		t.Fatalf("%d encodings for %d events in 3 formats, want one per event and format", got, n)
	}
}
