package apiserver

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// asMetadata is obj's metadata as a PartialObjectMetadata of meta.k8s.io version gv, what
// kube-apiserver answers to as=PartialObjectMetadata. It shares obj's fields (obj may be a
// shared decode): it is for encoding only.
func asMetadata(obj runtime.Object, gv schema.GroupVersion) (runtime.Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	p := meta.AsPartialObjectMetadata(m)
	p.SetGroupVersionKind(gv.WithKind("PartialObjectMetadata"))
	return p, nil
}

// asMetadataList is the metadata of objs as a PartialObjectMetadataList of version gv, with
// the list's resourceVersion, continue token and remaining count. The two versions are
// distinct types: their protobuf field numbers differ.
func asMetadataList(objs []runtime.Object, lm metav1.ListMeta, gv schema.GroupVersion) (runtime.Object, error) {
	items := make([]metav1.PartialObjectMetadata, 0, len(objs))
	for _, obj := range objs {
		p, err := asMetadata(obj, gv)
		if err != nil {
			return nil, err
		}
		items = append(items, *p.(*metav1.PartialObjectMetadata))
	}
	tm := metav1.TypeMeta{APIVersion: gv.String(), Kind: "PartialObjectMetadataList"}
	if gv == metav1beta1.SchemeGroupVersion {
		return &metav1beta1.PartialObjectMetadataList{TypeMeta: tm, ListMeta: lm, Items: items}, nil
	}
	return &metav1.PartialObjectMetadataList{TypeMeta: tm, ListMeta: lm, Items: items}, nil
}

// metadataAnswer turns a write's or read's result into the metadata shape a asks for. A
// Status (a delete's) is answered as it is, as kube-apiserver does.
func metadataAnswer(obj runtime.Object, a answer) (runtime.Object, error) {
	if _, ok := obj.(*metav1.Status); ok {
		return obj, nil
	}
	if a.shape == shapeMetadata {
		return asMetadata(obj, a.gv)
	}
	l, ok := obj.(*listBody) // deletecollection's answer: items are encoded objects
	if !ok {
		return nil, notAcceptableShape("you requested PartialObjectMetadataList, but the requested object is not a list")
	}
	objs := make([]runtime.Object, 0, len(l.Items))
	for _, raw := range l.Items {
		p := &metav1.PartialObjectMetadata{} // the JSON of any object decodes to its metadata
		if err := json.Unmarshal(raw, p); err != nil {
			return nil, err
		}
		objs = append(objs, p)
	}
	return asMetadataList(objs, l.ListMeta, a.gv)
}

// encoding is one of the forms in which the watch cache shares an event among watchers.
type encoding uint8

const (
	encJSON encoding = iota
	encProtobuf
	encMetadataJSON // PartialObjectMetadata, meta.k8s.io/v1
	encMetadataProtobuf
	encMetadataBetaJSON // PartialObjectMetadata, meta.k8s.io/v1beta1
	encMetadataBetaProtobuf
	numEncodings
)

// encodingOf is the event encoding a watch negotiated (not a table: tables are per watcher).
func encodingOf(a answer) encoding {
	e := encJSON
	switch {
	case a.shape == shapeMetadata && a.gv == metav1beta1.SchemeGroupVersion:
		e = encMetadataBetaJSON
	case a.shape == shapeMetadata:
		e = encMetadataJSON
	}
	if a.protobuf {
		e++
	}
	return e
}

// encodeAs encodes a stored object in encoding e.
func encodeAs(obj runtime.Object, e encoding) ([]byte, error) {
	var err error
	switch e {
	case encMetadataJSON, encMetadataProtobuf:
		obj, err = asMetadata(obj, metav1.SchemeGroupVersion)
	case encMetadataBetaJSON, encMetadataBetaProtobuf:
		obj, err = asMetadata(obj, metav1beta1.SchemeGroupVersion)
	}
	if err != nil {
		return nil, err
	}
	return encodeIn(obj, e%2 == 1)
}
