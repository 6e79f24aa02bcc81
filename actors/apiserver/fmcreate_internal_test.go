package apiserver

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/schemastest"
)

// untimed is obj as JSON with its managedFields' times left out, and whether every entry had
// a time within a minute of now.
func untimed(t *testing.T, obj runtime.Object) (string, bool) {
	t.Helper()
	obj = obj.DeepCopyObject()
	m := mustMeta(obj)
	fields := m.GetManagedFields()
	stamped := true
	for i := range fields {
		if tm := fields[i].Time; tm == nil || time.Since(tm.Time).Abs() > time.Minute {
			stamped = false
		}
		fields[i].Time = nil
	}
	m.SetManagedFields(fields)
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(data), stamped
}

// sameCreate: creating obj through trackCreate records what trackUpdate over an empty live
// object records, times apart, and stamps them now. It returns the memoised result's JSON.
func sameCreate(t *testing.T, what string, k *schemas.Kind, obj runtime.Object, wo writeOptions) string {
	t.Helper()
	plain, plainStamped := untimed(t, trackUpdate(k, "", newOf(k), obj.DeepCopyObject(), wo))
	memo, memoStamped := untimed(t, trackCreate(k, obj.DeepCopyObject(), wo))
	if plain != memo {
		t.Fatalf("%s: the memoised create differs:\nplain: %s\nmemo:  %s", what, plain, memo)
	}
	if plainStamped != memoStamped {
		t.Fatalf("%s: times stamped %v plain, %v memoised", what, plainStamped, memoStamped)
	}
	return memo
}

// cached: a create of obj would be answered from the memo.
func cached(k *schemas.Kind, obj runtime.Object, wo writeOptions) bool {
	key, ok := createKey(nil, k, wo.trackAs, managerOf(wo), obj)
	if !ok {
		return false
	}
	createFields.mu.Lock()
	defer createFields.mu.Unlock()
	_, hit := createFields.entries[string(key)]
	return hit
}

// renamed is obj with every field stripMeta removes set to other values.
func renamed(obj runtime.Object, i int) runtime.Object {
	obj = obj.DeepCopyObject()
	m := mustMeta(obj)
	m.SetName(fmt.Sprintf("other-%d", i))
	m.SetNamespace(fmt.Sprintf("ns-%d", i))
	m.SetUID(types.UID(fmt.Sprintf("uid-%d", i)))
	m.SetCreationTimestamp(metav1.NewTime(time.Unix(int64(1e9+i), 0)))
	m.SetSelfLink(fmt.Sprintf("/x/%d", i))
	m.SetGeneration(int64(i + 7))
	m.SetResourceVersion(fmt.Sprint(i + 3))
	return obj
}

// Fuzzed objects of every built-in kind, with and without the entries the fuzzer sends, and
// each again under other names (answered from the memo), record what the plain path records.
func TestCreateMemoRecordsAsThePlainPath(t *testing.T) {
	f := newFiller(t)
	memoised, kinds := 0, builtinKinds(t)
	for _, k := range kinds {
		for i := range 6 {
			what := fmt.Sprintf("%s #%d", k.GVK.Kind, i)
			obj := fuzzed(f, k)
			wo := writeOptions{fieldManager: fmt.Sprintf("creator-%d", i%3)}
			sameCreate(t, what+" as sent", k, obj, wo)
			mustMeta(obj).SetManagedFields(nil)
			sameCreate(t, what, k, obj, wo)
			other := renamed(obj, i)
			if cached(k, obj, wo) != cached(k, other, wo) {
				t.Fatalf("%s: renamed, the memo answers otherwise", what)
			}
			if cached(k, other, wo) {
				memoised++
			}
			sameCreate(t, what+" renamed", k, other, wo)
		}
	}
	if memoised < 4*len(kinds) { // a fuzzed object the field manager refuses is not kept
		t.Fatalf("only %d of %d renamed objects answered from the memo", memoised, 6*len(kinds))
	}
}

// The corpus' manifests, defaulted as a create defaults them, by two managers, and again under
// other names.
func TestCreateMemoTracksTheCorpusAlike(t *testing.T) {
	good := schemastest.GoodManifests(t)
	n := 0
	for _, name := range schemastest.Names(good) {
		docs, err := schemas.DecodeManifests(good[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, d := range docs {
			k, ok := schemas.ByGVK(d.Object.GetObjectKind().GroupVersionKind())
			if !ok {
				continue
			}
			n++
			schemas.Default(d.Object)
			what := fmt.Sprintf("%s #%d %s", name, i, k.GVK.Kind)
			for _, wo := range []writeOptions{{fieldManager: "kubectl-create"}, {userAgent: "kubectl/v1.34 (linux/amd64)"}, {}} {
				sameCreate(t, what, k, d.Object, wo)
				sameCreate(t, what+" renamed", k, renamed(d.Object, i), wo)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d objects in the corpus", n)
	}
}

// Pods of one template under other names, with kubectl's last-applied annotation, with entries
// the client sent (kept: the plain path), with the forms that reset them, and with a nil
// where the empty live object holds null versus an empty list, each record as the plain path.
func TestCreateMemoEdgeCases(t *testing.T) {
	pods, _ := schemas.ByResource("", "v1", "pods")
	slices, _ := schemas.ByResource("discovery.k8s.io", "v1", "endpointslices")
	wo := writeOptions{fieldManager: "replicaset-controller"}
	tag := fmt.Sprint(rand.Int63())
	template := controllerPod()
	template.Labels["run"] = tag
	for i := range 5 {
		sameCreate(t, "template pod", pods, renamed(template, i), wo)
	}
	applied := template.DeepCopy()
	for i, cfg := range []string{`{"kind":"Pod"}`, `{"kind":"Pod","metadata":{"name":"x"}}`} {
		applied.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: cfg}
		sameCreate(t, fmt.Sprintf("last-applied %d", i), pods, applied, writeOptions{fieldManager: "kubectl-client-side-apply"})
	}
	sent := template.DeepCopy()
	sent.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "earlier", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:app":{}}}}`)}, Time: ptrTime(time.Now())}}
	sameCreate(t, "entries sent", pods, sent, wo)
	if cached(pods, sent, wo) {
		t.Fatal("a create with entries sent is answered from the memo")
	}
	for i, reset := range [][]metav1.ManagedFieldsEntry{{}, {{}}} {
		sent.ManagedFields = reset
		sameCreate(t, fmt.Sprintf("reset form %d", i), pods, sent, wo)
	}
	big := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "big"},
		Data: map[string]string{"blob": strings.Repeat("x", maxCreateKey)}}
	configMaps, _ := schemas.ByResource("", "v1", "configmaps")
	sameCreate(t, "large", configMaps, big, wo)
	if cached(configMaps, big, wo) {
		t.Fatal("an object over the key bound is memoised")
	}
	for _, m := range []string{"a", "b", "a"} {
		sameCreate(t, "manager "+m, pods, template, writeOptions{fieldManager: m})
	}
	noContainers, emptyContainers := template.DeepCopy(), template.DeepCopy()
	noContainers.Spec.Containers, emptyContainers.Spec.Containers = nil, []corev1.Container{}
	if sameCreate(t, "containers nil", pods, noContainers, wo) == sameCreate(t, "containers empty", pods, emptyContainers, wo) {
		t.Fatal("nil and empty containers recorded alike")
	}
	// With omitempty, nil and empty are both left out: one key, one result.
	bare := controllerPod()
	bare.Labels, bare.OwnerReferences = nil, nil
	bare.GenerateName = tag
	emptied := renamed(bare, 9).(*corev1.Pod)
	emptied.Labels, emptied.OwnerReferences, emptied.Spec.ImagePullSecrets = map[string]string{}, []metav1.OwnerReference{}, []corev1.LocalObjectReference{}
	sameCreate(t, "omitempty nil", pods, bare, wo)
	if !cached(pods, emptied, wo) {
		t.Fatal("omitted empty lists change the key")
	}
	sameCreate(t, "omitempty empty", pods, emptied, wo)
	es := &discoveryv1.EndpointSlice{TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default", Labels: map[string]string{"run": tag}}, AddressType: discoveryv1.AddressTypeIPv4}
	esEmpty := es.DeepCopy()
	esEmpty.Endpoints = []discoveryv1.Endpoint{}
	if sameCreate(t, "endpoints nil", slices, es, wo) == sameCreate(t, "endpoints empty", slices, esEmpty, wo) {
		t.Fatal("nil and empty endpoints recorded alike")
	}
}

func ptrTime(at time.Time) *metav1.Time { return &metav1.Time{Time: at.UTC().Truncate(time.Second)} }

// A second pod of a template is answered from the memo; one more label is not.
func TestCreateMemoHitsPodsOfOneTemplate(t *testing.T) {
	pods, _ := schemas.ByResource("", "v1", "pods")
	wo := writeOptions{fieldManager: "replicaset-controller"}
	first := controllerPod()
	first.Labels["run"] = fmt.Sprint(rand.Int63()) // a shape no other test made
	if cached(pods, first, wo) {
		t.Fatal("a new shape is cached already")
	}
	trackCreate(pods, first.DeepCopy(), wo)
	second := renamed(first, 1).(*corev1.Pod)
	if !cached(pods, second, wo) {
		t.Fatal("the second pod of the template is not cached")
	}
	hits := createFieldsHits.Load()
	trackCreate(pods, second, wo)
	if createFieldsHits.Load() <= hits {
		t.Fatal("the second pod of the template missed the memo")
	}
	labelled := renamed(first, 2).(*corev1.Pod)
	labelled.Labels["extra"] = "1"
	if cached(pods, labelled, wo) {
		t.Fatal("a pod with one more label is cached")
	}
	trackCreate(pods, labelled, wo)
	if len(labelled.ManagedFields) != 1 {
		t.Fatalf("recorded %v", labelled.ManagedFields)
	}
	var fields map[string]any
	if err := json.Unmarshal(labelled.ManagedFields[0].FieldsV1.Raw, &fields); err != nil {
		t.Fatal(err)
	}
	if _, ok := fields["f:metadata"].(map[string]any)["f:labels"].(map[string]any)["f:extra"]; !ok {
		t.Fatalf("the extra label is not recorded: %s", labelled.ManagedFields[0].FieldsV1.Raw)
	}
}

// Events are keyed by shape: a second Scheduled event, of another pod, message and time, is
// answered from the memo and records what the plain path records; one more label is not.
func TestCreateMemoKeysEventsByShape(t *testing.T) {
	events, _ := schemas.ByResource("", "v1", "events")
	wo := writeOptions{fieldManager: "default-scheduler"}
	tag := fmt.Sprint(rand.Int63()) // as an annotation's key, a shape no other test made
	event := func(pod string, at time.Time) *corev1.Event {
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: pod + "." + tag, Namespace: "default", Annotations: map[string]string{tag: "x"}},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod, UID: types.UID(pod + "-uid")},
			Reason:         "Scheduled", Message: "Successfully assigned default/" + pod + " to node-" + tag, Type: corev1.EventTypeNormal,
			Count: 1, FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at), Source: corev1.EventSource{Component: tag}}
		setTypeMeta(ev, events)
		return ev
	}
	first := event("web-1", time.Now())
	if cached(events, first, wo) {
		t.Fatal("a new shape is cached already")
	}
	sameCreate(t, "first event", events, first, wo)
	second := event("web-2-longer-name", time.Now().Add(time.Hour))
	second.Count = 7
	if !cached(events, second, wo) {
		t.Fatal("an event of the same shape is not cached")
	}
	hits := createFieldsHits.Load()
	sameCreate(t, "second event", events, second, wo)
	if createFieldsHits.Load() <= hits {
		t.Fatal("the second event missed the memo")
	}
	for what, other := range map[string]*corev1.Event{"labelled": event("web-3", time.Now()), "no count": event("web-4", time.Now())} {
		if what == "labelled" {
			other.Labels = map[string]string{"extra": "1"}
		} else {
			other.Count = 0
		}
		if cached(events, other, wo) {
			t.Fatalf("an event %s is cached", what)
		}
		sameCreate(t, what, events, other, wo)
	}
}

// The claim shape keys rest on: fuzzed objects of every built-in kind and the same objects
// with every scalar changed to another of the same zero-ness (lists, map keys and types that
// convert themselves kept) share a shape key and record the same entry; changed also in
// zero-ness here and there, they record the same entry whenever the key stays the same.
func TestShapeKeyedObjectsRecordAlike(t *testing.T) {
	f := newFiller(t)
	rnd := rand.New(rand.NewSource(time.Now().UnixNano()))
	same, flipped := 0, 0
	for _, k := range builtinKinds(t) {
		for i := range 6 {
			obj := fuzzed(f, k)
			mustMeta(obj).SetManagedFields(nil)
			key, ok := createKeyBy(nil, k, "", "m", obj.DeepCopyObject(), true)
			if !ok {
				continue
			}
			record := plainEntries(t, k, obj)
			for _, mayFlip := range []bool{false, true} {
				other := obj.DeepCopyObject()
				perturb(reflect.ValueOf(other).Elem(), func() bool { return mayFlip && rnd.Intn(8) == 0 })
				otherKey, _ := createKeyBy(nil, k, "", "m", other.DeepCopyObject(), true)
				if string(key) != string(otherKey) {
					if mayFlip {
						continue // keys apart claim nothing
					}
					t.Fatalf("%s #%d: the shape key changed with the values", k.GVK.Kind, i)
				}
				if got := plainEntries(t, k, other); got != record {
					t.Fatalf("%s #%d: one shape, two records:\n%s\n%s", k.GVK.Kind, i, record, got)
				}
				same++
			}
			flipped++
		}
	}
	if same < 100 {
		t.Fatalf("only %d objects of %d compared by shape", same, flipped)
	}
}

// plainEntries are the plain path's managedFields for creating obj, times left out.
func plainEntries(t *testing.T, k *schemas.Kind, obj runtime.Object) string {
	t.Helper()
	fields := mustMeta(trackUpdate(k, "", newOf(k), obj.DeepCopyObject(), writeOptions{fieldManager: "m"})).GetManagedFields()
	for i := range fields {
		fields[i].Time = nil
	}
	data, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// perturb changes every scalar appendShape keys by zero-ness to another value, of the same
// zero-ness unless flip says otherwise: strings, integers, booleans (flipped only) and times,
// also as map values; flip also renames map keys. TypeMeta is left alone.
func perturb(v reflect.Value, flip func() bool) {
	t := v.Type()
	if shapeTimes[t] {
		var at *time.Time
		switch x := v.Addr().Interface().(type) {
		case *metav1.Time:
			at = &x.Time
		case *metav1.MicroTime:
			at = &x.Time
		}
		switch {
		case flip() && at.IsZero():
			*at = time.Unix(1e9, 0)
		case flip():
			*at = time.Time{}
		case !at.IsZero():
			*at = at.Add(time.Hour)
		}
		return
	}
	if convertsItself(t) || t == reflect.TypeFor[metav1.TypeMeta]() {
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		if flip() {
			v.SetBool(!v.Bool())
		}
	case reflect.String:
		switch {
		case flip() && v.Len() == 0:
			v.SetString("y")
		case flip():
			v.SetString("")
		case v.Len() > 0:
			v.SetString(v.String() + "x")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		switch n := v.Int(); {
		case flip() && n == 0:
			v.SetInt(1)
		case flip():
			v.SetInt(0)
		case n == -1:
			v.SetInt(-2)
		case n != 0:
			v.SetInt(n + 1)
		}
	case reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		switch n := v.Uint(); {
		case flip() && n == 0:
			v.SetUint(1)
		case flip():
			v.SetUint(0)
		case n != 0:
			v.SetUint(n%1000 + 1)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			perturb(v.Elem(), flip)
		}
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				perturb(v.Field(i), flip)
			}
		}
	case reflect.Map:
		for _, key := range v.MapKeys() {
			elem := reflect.New(t.Elem()).Elem()
			elem.Set(v.MapIndex(key))
			perturb(elem, flip)
			if t.Key().Kind() == reflect.String && flip() { // renamed
				v.SetMapIndex(key, reflect.Value{})
				key = reflect.ValueOf(key.String() + "k").Convert(t.Key())
			}
			v.SetMapIndex(key, elem)
		}
	}
}
