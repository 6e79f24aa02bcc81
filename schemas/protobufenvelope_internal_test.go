package schemas

import (
	"bytes"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// envelopeSamples are objects of several kinds, with and without apiVersion and kind set.
func envelopeSamples() []runtime.Object {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}, NodeName: "n"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"}}
	kindedPod := pod.DeepCopy()
	kindedPod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	return []runtime.Object{
		pod, kindedPod,
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("h")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: map[string][]byte{"k": []byte("v")}},
	}
}

// EncodeProtobuf writes what the serializer's runtime.Encode writes for the object with its
// kind set, and leaves an object without a kind as it was.
func TestEncodeProtobufWritesWhatTheSerializerWrites(t *testing.T) {
	for _, obj := range envelopeSamples() {
		before := obj.DeepCopyObject()
		got, ok, err := EncodeProtobuf(obj)
		if err != nil || !ok {
			t.Fatalf("%T: %v %v", obj, ok, err)
		}
		if !reflect.DeepEqual(before, obj) {
			t.Fatalf("%T was modified by encoding it", obj)
		}
		kinded := obj.DeepCopyObject()
		gvk, err := ObjectKind(kinded)
		if err != nil {
			t.Fatal(err)
		}
		kinded.GetObjectKind().SetGroupVersionKind(gvk)
		want, err := runtime.Encode(protobufSerializer, kinded)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%T:\n got %x\nwant %x", obj, got, want)
		}
	}
}

// FuzzReadEnvelope: what readEnvelope accepts the serializer's decoder accepts too and reads
// the same apiVersion, kind, raw bytes and content fields from; what it refuses,
// UnmarshalProtobuf leaves to the decoder.
func FuzzReadEnvelope(f *testing.F) {
	for _, obj := range envelopeSamples() {
		data, _, err := EncodeProtobuf(obj)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("k8s\x00"))
	f.Add([]byte("k8s\x00\x0a\x02\x0a\x00"))
	f.Add([]byte("k8s\x00\x12\x05abc"))
	f.Add([]byte("k8s\x00\x08\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var want runtime.Unknown
		_, _, wantErr := protobufSerializer.Decode(data, nil, &want)
		got, err := readEnvelope(data)
		if err != nil {
			return
		}
		if wantErr != nil {
			t.Fatalf("readEnvelope read what the serializer refuses (%v)", wantErr)
		}
		if got.TypeMeta != want.TypeMeta || !bytes.Equal(got.Raw, want.Raw) || got.ContentEncoding != want.ContentEncoding {
			t.Fatalf("read %+v, the serializer read %+v", got, want)
		}
	})
}
