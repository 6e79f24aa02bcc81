package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/schemas"
)

// listBody is a typed list (PodList, ...) built without a typed Go list: the items are already
// encoded objects.
type listBody struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []json.RawMessage `json:"items"`
}

// DeepCopyObject lets listBody travel as a runtime.Object.
func (l *listBody) DeepCopyObject() runtime.Object {
	c := *l
	c.Items = append([]json.RawMessage(nil), l.Items...)
	return &c
}

// serveList answers a list in the negotiated shape: the kind's list, a table, or a
// PartialObjectMetadataList.
func (s *Server) serveList(w http.ResponseWriter, r *http.Request, k *schemas.Kind, info requestInfo, a answer) {
	objs, lm, err := s.listPage(r.Context(), k, info)
	if err != nil {
		writeError(w, err)
		return
	}
	switch a.shape {
	case shapeTable:
		t := schemas.Table(k, objs, s.now())
		t.ListMeta = lm
		writeJSON(w, http.StatusOK, t)
		return
	case shapeMetadataList:
		l, err := asMetadataList(objs, lm, a.gv)
		if err != nil {
			writeError(w, apierrors.NewInternalError(err))
			return
		}
		writeEncoded(w, a.protobuf, http.StatusOK, l)
		return
	}
	if a.protobuf {
		list, err := typedList(k, objs, lm)
		if err != nil {
			writeError(w, apierrors.NewInternalError(err))
			return
		}
		writeEncoded(w, true, http.StatusOK, list)
		return
	}
	l := s.listResponse(k, objs, 0)
	l.ListMeta = lm
	writeJSON(w, http.StatusOK, l)
}

// typedList is the kind's typed list (a PodList, ...) of objs, what kube-apiserver answers in
// protobuf to a client preferring it. The items are shallow copies of objs, which are not
// modified (they may be shared decodes).
func typedList(k *schemas.Kind, objs []runtime.Object, lm metav1.ListMeta) (runtime.Object, error) {
	gvk := k.GVK.GroupVersion().WithKind(k.ListKind)
	list, err := schemas.Scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	if err := meta.SetList(list, objs); err != nil {
		return nil, err
	}
	la, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	la.SetResourceVersion(lm.ResourceVersion)
	la.SetContinue(lm.Continue)
	la.SetRemainingItemCount(lm.RemainingItemCount)
	list.GetObjectKind().SetGroupVersionKind(gvk)
	return list, nil
}

func (s *Server) listResponse(k *schemas.Kind, objs []runtime.Object, rev uint64) *listBody {
	l := &listBody{
		TypeMeta: metav1.TypeMeta{APIVersion: k.GVK.GroupVersion().String(), Kind: k.ListKind},
		ListMeta: metav1.ListMeta{ResourceVersion: formatRev(rev)},
		Items:    make([]json.RawMessage, 0, len(objs)),
	}
	for _, obj := range objs {
		data, err := json.Marshal(obj)
		if err == nil {
			l.Items = append(l.Items, data)
		}
	}
	return l
}

// listPage answers a list, one page of it when the request has a limit or a continue token
// (paging.go): the page, and the list metadata with the revision, the next page's token and
// how many objects remain.
func (s *Server) listPage(ctx context.Context, k *schemas.Kind, info requestInfo) ([]runtime.Object, metav1.ListMeta, error) {
	pg, err := pageOf(info, schemas.StoragePrefix(k, info.namespace))
	if err != nil {
		return nil, metav1.ListMeta{}, err
	}
	at, err := listReadAt(info)
	if err != nil {
		return nil, metav1.ListMeta{}, err
	}
	if pg.rev > 0 {
		at = listAt{exact: uint64(pg.rev)} // the first page's revision: one consistent list
	}
	objs, rev, err := s.listObjectsAt(ctx, k, info, at, &pg)
	if err != nil {
		return nil, metav1.ListMeta{}, pg.expired(err)
	}
	return pg.cut(k, objs, rev)
}

// listObjects reads the objects of a kind in a namespace (all namespaces for ""), filtered by
// the request's selectors, and the revision the list reflects; resourceVersion and
// resourceVersionMatch as in Kubernetes (readrv.go).
func (s *Server) listObjects(ctx context.Context, k *schemas.Kind, info requestInfo) ([]runtime.Object, uint64, error) {
	at, err := listReadAt(info)
	if err != nil {
		return nil, 0, err
	}
	return s.listObjectsAt(ctx, k, info, at, &listPage{})
}

// listObjectsAt lists at `at`, in key order; of a page it decodes only the objects from its
// start key on, and one more than its limit once no selector filters.
func (s *Server) listObjectsAt(ctx context.Context, k *schemas.Kind, info requestInfo, at listAt, pg *listPage) ([]runtime.Object, uint64, error) {
	sel, err := parseSelectors(info)
	if err != nil {
		return nil, 0, err
	}
	pg.everything = sel.everything()
	if err := sel.validateFields(k.New()); err != nil {
		return nil, 0, err
	}
	if objs, rev, ok, err := s.listByNode(ctx, k, info, sel, at); ok {
		if err == nil {
			slices.SortFunc(objs, func(a, b runtime.Object) int { return strings.Compare(objectKey(k, a), objectKey(k, b)) })
		}
		return objs, rev, err
	}
	entries, rev, err := s.listEntries(ctx, schemas.StoragePrefix(k, info.namespace), at)
	if err != nil {
		return nil, 0, err
	}
	objs := make([]runtime.Object, 0, len(entries))
	for i, e := range entries {
		if e.Key < pg.start {
			continue
		}
		if pg.limit > 0 && sel.everything() && int64(len(objs)) > pg.limit {
			// The rest is only counted: remainingItemCount needs no decoding.
			pg.uncounted = int64(len(entries) - i)
			break
		}
		obj, err := decodeStored(k, e.Value, e.Rev)
		if err != nil {
			return nil, 0, apierrors.NewInternalError(err)
		}
		if sel.matches(obj) {
			objs = append(objs, obj)
		}
	}
	return objs, rev, nil
}

// objectKey is the storage key of a listed object: the order pages follow.
func objectKey(k *schemas.Kind, obj runtime.Object) string {
	m := mustMeta(obj)
	return schemas.StorageKey(k, m.GetNamespace(), m.GetName())
}
