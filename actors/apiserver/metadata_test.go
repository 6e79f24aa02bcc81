package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

var (
	podsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	widgetsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

// formatTransport makes client-go's metadata client (which always asks for protobuf first)
// ask for JSON only when protobuf is false, and records the Content-Type of every answer.
type formatTransport struct {
	protobuf bool
	rec      contentTypes
	lists    atomic.Int32 // pod lists and watch-lists: an informer whose watches work asks once
}

func (f *formatTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if q := r.URL.Query(); r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/pods") &&
		(q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true") {
		f.lists.Add(1)
	}
	if !f.protobuf {
		var keep []string
		for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
			if !strings.HasPrefix(strings.TrimSpace(part), protobufType) {
				keep = append(keep, part)
			}
		}
		r = r.Clone(r.Context())
		r.Header.Set("Accept", strings.Join(keep, ","))
	}
	return f.rec.RoundTrip(r)
}

// check fails unless every answer seen was in the transport's format.
func (f *formatTransport) check(t *testing.T) {
	t.Helper()
	seen := f.rec.take()
	if len(seen) == 0 {
		t.Fatal("no answers recorded")
	}
	for _, s := range seen {
		ct := s[strings.Index(s, " ")+1:]
		if isPB := strings.HasPrefix(ct, protobufType); isPB != f.protobuf || (!isPB && ct != "application/json") {
			t.Errorf("answer %q, want protobuf=%v", s, f.protobuf)
		}
	}
}

// formatConfig is a client config whose requests go through a formatTransport.
func formatConfig(host string, protobuf bool) (*rest.Config, *formatTransport) {
	ft := &formatTransport{protobuf: protobuf}
	return &rest.Config{Host: host,
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { ft.rec.next = rt; return ft }}, ft
}

func metadataClient(t *testing.T, host string, protobuf bool) (metadata.Interface, *formatTransport) {
	t.Helper()
	cfg, ft := formatConfig(host, protobuf)
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return mc, ft
}

// metaObjects are what a metadata test creates, relabels and deletes through the JSON API.
type metaObjects struct {
	a    api
	path string // the collection
	body func(name string) string
}

func (o metaObjects) create(name string) map[string]any {
	return o.a.mustDo(201, "POST", o.path, "application/json", o.body(name))
}

func (o metaObjects) relabel(name, value string) {
	o.a.mustDo(200, "PATCH", o.path+"/"+name, "application/merge-patch+json", `{"metadata":{"labels":{"m":"`+value+`"}}}`)
}

func (o metaObjects) remove(name string) { o.a.mustDo(200, "DELETE", o.path+"/"+name, "", "") }

// exerciseMetadataClient gets, pages through and watches five objects with client-go's
// metadata client, in JSON or protobuf.
func exerciseMetadataClient(t *testing.T, mc metadata.Interface, ft *formatTransport, gvr schema.GroupVersionResource, objs metaObjects, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var want []string
	var uid0 any
	for i := range 5 {
		name := fmt.Sprintf("%s%d", prefix, i)
		out := objs.create(name)
		if i == 0 {
			uid0 = get(out, "metadata", "uid")
		}
		want = append(want, name)
	}
	rc := mc.Resource(gvr).Namespace("default")
	one, err := rc.Get(ctx, want[0], metav1.GetOptions{})
	if err != nil || one.Name != want[0] || string(one.UID) != uid0 || one.ResourceVersion == "" || one.Labels["tier"] != want[0] {
		t.Fatalf("metadata get: %+v %v", one, err)
	}
	var got []string
	var rv string
	opts := metav1.ListOptions{Limit: 2}
	for page := 0; ; page++ {
		l, err := rc.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if page == 0 {
			rv = l.ResourceVersion
			if l.Continue == "" || l.RemainingItemCount == nil || *l.RemainingItemCount != 3 {
				t.Fatalf("first page: continue %q remaining %v", l.Continue, l.RemainingItemCount)
			}
		} else if l.ResourceVersion != rv {
			t.Fatalf("page %d at %s, first at %s", page, l.ResourceVersion, rv)
		}
		for _, it := range l.Items {
			// Protobuf carries no TypeMeta of items: only JSON shows it.
			if (!ft.protobuf && (it.Kind != "PartialObjectMetadata" || it.APIVersion != "meta.k8s.io/v1")) || it.UID == "" {
				t.Fatalf("list item %+v", it)
			}
			got = append(got, it.Name)
		}
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged metadata list %v, want %v", got, want)
	}
	w, err := rc.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	objs.relabel(want[1], "x")
	objs.remove(want[2])
	for _, exp := range []string{"MODIFIED " + want[1] + " x", "DELETED " + want[2] + " "} {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if !ok {
				t.Fatalf("watch event %s of %T: %v", ev.Type, ev.Object, ev.Object)
			}
			if s := fmt.Sprintf("%s %s %s", ev.Type, p.Name, p.Labels["m"]); s != exp {
				t.Fatalf("watch event %q, want %q", s, exp)
			}
		case <-ctx.Done():
			t.Fatalf("no watch event %q", exp)
		}
	}
	// WatchList: the current objects, then the bookmark that ends them, also metadata.
	wl, err := rc.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Stop()
	for n := 0; ; n++ {
		ev := <-wl.ResultChan()
		p, ok := ev.Object.(*metav1.PartialObjectMetadata)
		if !ok {
			t.Fatalf("watch-list event %s of %T", ev.Type, ev.Object)
		}
		if ev.Type == watch.Bookmark {
			if n != 4 || p.Annotations["k8s.io/initial-events-end"] != "true" || p.ResourceVersion == "" {
				t.Fatalf("bookmark after %d objects: %+v", n, p)
			}
			break
		}
	}
	ft.check(t)
}

func widgetObjects(t *testing.T) metaObjects {
	a, _ := newAPI(t)
	createWidgetCRD(t, a)
	return metaObjects{a: a, path: widgetsPath, body: func(name string) string { return widget(name, `{"color":"red"}`) }}
}

func podObjects(t *testing.T) metaObjects {
	a, _ := newAPI(t)
	return metaObjects{a: a, path: podsPath, body: func(name string) string { return podJSON(name, `,"labels":{"tier":"`+name+`"}`) }}
}

// client-go's metadata client reads pods and custom resources as PartialObjectMetadata, in
// JSON and in protobuf (which a custom resource's metadata has: the wrapper is built in).
func TestMetadataClientGetListWatch(t *testing.T) {
	for _, pb := range []bool{false, true} {
		t.Run(fmt.Sprintf("pods/protobuf=%v", pb), func(t *testing.T) {
			objs := podObjects(t)
			mc, ft := metadataClient(t, objs.a.base, pb)
			exerciseMetadataClient(t, mc, ft, podsGVR, objs, "p")
		})
		t.Run(fmt.Sprintf("widgets/protobuf=%v", pb), func(t *testing.T) {
			objs := widgetObjects(t)
			mc, ft := metadataClient(t, objs.a.base, pb)
			exerciseMetadataClient(t, mc, ft, widgetsGVR, objs, "w")
		})
	}
}

// informerLog records a metadata informer's notifications.
type informerLog struct {
	mu  sync.Mutex
	got []string
}

func (l *informerLog) add(s string) { l.mu.Lock(); l.got = append(l.got, s); l.mu.Unlock() }

func (l *informerLog) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		found := slices.Contains(l.got, want)
		l.mu.Unlock()
		if found {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Fatalf("informer never saw %q; saw %v", want, l.got)
}

func metaName(obj any) string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p := obj.(*metav1.PartialObjectMetadata)
	return p.Name + "/" + p.Labels["m"]
}

// A metadata informer (what controller-runtime and the garbage collector run) syncs and then
// follows adds, updates and deletes.
func TestMetadataInformerFollowsPods(t *testing.T) {
	for _, pb := range []bool{false, true} {
		t.Run(fmt.Sprintf("protobuf=%v", pb), func(t *testing.T) {
			objs := podObjects(t)
			objs.create("before")
			mc, ft := metadataClient(t, objs.a.base, pb)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := metadatainformer.NewSharedInformerFactory(mc, 0)
			inf := f.ForResource(podsGVR).Informer()
			log := &informerLog{}
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    func(o any) { log.add("add " + metaName(o)) },
				UpdateFunc: func(_, o any) { log.add("update " + metaName(o)) },
				DeleteFunc: func(o any) { log.add("delete " + metaName(o)) },
			}); err != nil {
				t.Fatal(err)
			}
			f.Start(ctx.Done())
			defer f.Shutdown()
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				t.Fatal("metadata informer did not sync")
			}
			log.waitFor(t, "add before/")
			objs.create("after")
			log.waitFor(t, "add after/")
			objs.relabel("after", "y")
			log.waitFor(t, "update after/y")
			objs.remove("before")
			log.waitFor(t, "delete before/")
			cancel()
			ft.check(t)
			if n := ft.lists.Load(); n != 1 {
				t.Fatalf("the informer listed %d times: its watch failed", n)
			}
		})
	}
}

// A metadata watch from a compacted revision ends with client-go's Expired error, on which
// informers relist.
func TestMetadataWatchFromCompactedRevisionIsExpired(t *testing.T) {
	for _, pb := range []bool{false, true} {
		t.Run(fmt.Sprintf("protobuf=%v", pb), func(t *testing.T) {
			a, cp := newAPI(t)
			rv := get(a.mustDo(201, "POST", podsPath, "application/json", podJSON("p", "")), "metadata", "resourceVersion").(string)
			for i := range 3 {
				a.mustDo(200, "PATCH", podsPath+"/p", "application/merge-patch+json", fmt.Sprintf(`{"metadata":{"labels":{"n":"%d"}}}`, i))
			}
			if err := cp.Log.Compact(context.Background(), cp.Log.Rev()); err != nil {
				t.Fatal(err)
			}
			mc, ft := metadataClient(t, a.base, pb)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			w, err := mc.Resource(podsGVR).Namespace("default").Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			ev := <-w.ResultChan()
			if err := apierrors.FromObject(ev.Object); ev.Type != watch.Error || !apierrors.IsResourceExpired(err) {
				t.Fatalf("watch from compacted %s: %s %v", rv, ev.Type, err)
			}
			ft.check(t)
		})
	}
}

// Raw answers: the exact shapes and versions, and 406 for a shape Skiff does not serve when
// nothing else is acceptable.
func TestMetadataNegotiation(t *testing.T) {
	objs := podObjects(t)
	objs.create("n")
	base := objs.a.base
	const metaJSON = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	code, ct, body := getWith(t, base+podsPath+"/n", metaJSON)
	var out map[string]any
	if code != 200 || ct != "application/json" || json.Unmarshal(body, &out) != nil ||
		out["kind"] != "PartialObjectMetadata" || out["apiVersion"] != "meta.k8s.io/v1" || out["spec"] != nil || get(out, "metadata", "name") != "n" {
		t.Fatalf("metadata get: %d %s %s", code, ct, body)
	}
	code, _, body = getWith(t, base+podsPath, "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1")
	out = nil
	if code != 200 || json.Unmarshal(body, &out) != nil || out["kind"] != "PartialObjectMetadataList" || out["apiVersion"] != "meta.k8s.io/v1beta1" {
		t.Fatalf("v1beta1 metadata list: %d %s", code, body)
	}
	// A metadata-client patch answers the patched object's metadata.
	mc, _ := metadataClient(t, base, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := mc.Resource(podsGVR).Namespace("default").Patch(ctx, "n", types.MergePatchType, []byte(`{"metadata":{"labels":{"m":"p"}}}`), metav1.PatchOptions{})
	if err != nil || p.Labels["m"] != "p" || p.Labels["tier"] != "n" {
		t.Fatalf("metadata patch: %+v %v", p, err)
	}
	for _, c := range []struct{ path, accept string }{
		{podsPath + "/n", "application/json;as=Widget;g=meta.k8s.io;v=v1"},
		{podsPath + "/n", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2"},
		{podsPath + "/n", protobufType + ";as=Table;g=meta.k8s.io;v=v1"},
		{podsPath + "/n", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"},
		{podsPath, metaJSON},
	} {
		code, _, body := getWith(t, base+c.path, c.accept)
		out = nil
		if code != http.StatusNotAcceptable || json.Unmarshal(body, &out) != nil || out["reason"] != "NotAcceptable" {
			t.Errorf("GET %s Accept %s: %d %s, want 406", c.path, c.accept, code, body)
		}
	}
	// With a fallback the object itself is served.
	code, _, body = getWith(t, base+podsPath+"/n", "application/json;as=Widget;g=meta.k8s.io;v=v1, application/json")
	out = nil
	if code != 200 || json.Unmarshal(body, &out) != nil || out["kind"] != "Pod" {
		t.Fatalf("fallback: %d %s", code, body)
	}
}
