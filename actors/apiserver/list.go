package apiserver

import (
	"context"
	"encoding/json"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

func (s *Server) serveList(w http.ResponseWriter, r *http.Request, k *schemas.Kind, info requestInfo) {
	objs, rev, err := s.listObjects(r.Context(), k, info)
	if err != nil {
		writeError(w, err)
		return
	}
	if wantsTable(r) {
		t := schemas.Table(k, objs, s.now())
		t.ResourceVersion = formatRev(rev)
		writeJSON(w, http.StatusOK, t)
		return
	}
	writeJSON(w, http.StatusOK, s.listResponse(k, objs, rev))
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

// listObjects reads the objects of a kind in a namespace (all namespaces for ""), filtered by
// the request's selectors, and the revision the list reflects; resourceVersion and
// resourceVersionMatch as in Kubernetes (readrv.go).
func (s *Server) listObjects(ctx context.Context, k *schemas.Kind, info requestInfo) ([]runtime.Object, uint64, error) {
	sel, err := parseSelectors(info)
	if err != nil {
		return nil, 0, err
	}
	if err := sel.validateFields(k.New()); err != nil {
		return nil, 0, err
	}
	at, err := listReadAt(info)
	if err != nil {
		return nil, 0, err
	}
	if objs, rev, ok, err := s.listByNode(ctx, k, info, sel, at); ok {
		return objs, rev, err
	}
	entries, rev, err := s.listEntries(ctx, schemas.StoragePrefix(k, info.namespace), at)
	if err != nil {
		return nil, 0, err
	}
	objs := make([]runtime.Object, 0, len(entries))
	for _, e := range entries {
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
