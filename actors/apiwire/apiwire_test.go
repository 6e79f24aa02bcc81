package apiwire_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/skiff-sh/skiff/actors/apiwire"
)

// A request and an answer survive the binary form whole: the body byte for byte (a protobuf
// body, which the JSON envelope had to base64), the caller's headers, and the code.
func TestBinaryFormRoundTrips(t *testing.T) {
	for _, req := range []apiwire.Request{
		{Method: "PUT", Path: "/api/v1/namespaces/ns/pods/p/status?fieldManager=x", ContentType: "application/vnd.kubernetes.protobuf",
			Body: []byte("k8s\x00\x0a\x00\xff\x00"), Header: map[string]string{"Accept": "application/json", "traceparent": "00-abc-def-01"}},
		{Method: "GET", Path: "/api/v1/pods?watch=1"},
	} {
		data, h := req.Msg()
		h.Set("Skiff-Deadline", "123") // the transport's own header is not the caller's
		got, ok := apiwire.RequestFromMsg(data, h)
		if !ok || !reflect.DeepEqual(got, req) {
			t.Errorf("request %+v came back as %+v (ok %v)", req, got, ok)
		}
	}
	if _, ok := apiwire.RequestFromMsg([]byte(`{"method":"GET","path":"/api"}`), nats.Header{}); ok {
		t.Error("a JSON envelope was read as the binary form")
	}
	if got, _ := apiwire.RequestFromMsg(nil, nats.Header{apiwire.HdrMethod: {"GET"}}); got.Method != "GET" {
		t.Errorf("method %q", got.Method)
	}
	resp := apiwire.Response{Code: 201, Body: []byte("k8s\x00\x01")}
	data, h := resp.Msg()
	got, err := apiwire.ResponseFromMsg(data, h)
	if err != nil || got.Code != 201 || !bytes.Equal(got.Body, resp.Body) {
		t.Errorf("answer %+v came back as %+v (%v)", resp, got, err)
	}
	if _, err := apiwire.ResponseFromMsg([]byte(`{"code":200}`), nats.Header{}); err == nil {
		t.Error("an answer without a code header was accepted")
	}
}
