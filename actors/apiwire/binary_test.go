package apiwire

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"testing"
)

var requests = []Request{
	{},
	{Method: "GET", Path: "/api/v1/pods?watch=true&resourceVersion=12"},
	{Method: "PUT", Path: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", ContentType: "application/json",
		Body: []byte(`{"kind":"Lease"}`), Header: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "User-Agent": "skiff-node"}},
	{Method: "POST", Path: "/x", Body: []byte{0, 1, 0xff, '{'}, Header: map[string]string{"": ""}},
}

func TestBinaryRoundTrip(t *testing.T) {
	for _, req := range requests {
		data := EncodeRequest(req)
		if data[0] != binaryV1 {
			t.Fatalf("leading byte %#x", data[0])
		}
		got, form, err := DecodeRequest(data)
		if err != nil || form != FormBinary || !reflect.DeepEqual(got, req) {
			t.Errorf("%+v: decoded %+v, %v, %v", req, got, form, err)
		}
		if j, _ := json.Marshal(req); len(data) > len(j) {
			t.Errorf("%+v: binary %d bytes, JSON %d", req, len(data), len(j))
		}
	}
	for _, resp := range []Response{{Code: 200, Body: []byte(`{"kind":"Pod"}`)}, {Code: 404}, {Code: 500, Body: []byte{0xff}}} {
		got, err := DecodeResponse(EncodeResponse(resp, FormBinary))
		if err != nil || !reflect.DeepEqual(got, resp) {
			t.Errorf("%+v: decoded %+v, %v", resp, got, err)
		}
	}
}

// The JSON envelope of older clients is still read, and answered in JSON.
func TestJSONEnvelopeStillRead(t *testing.T) {
	for _, req := range requests {
		data, _ := json.Marshal(req)
		got, form, err := DecodeRequest(data)
		if err != nil || form != FormJSON || !reflect.DeepEqual(got, req) {
			t.Errorf("%s: decoded %+v, %v, %v", data, got, form, err)
		}
	}
	out := EncodeResponse(Response{Code: 201, Body: []byte("x")}, FormJSON)
	var resp Response
	if err := json.Unmarshal(out, &resp); err != nil || resp.Code != 201 || string(resp.Body) != "x" {
		t.Errorf("JSON answer %s: %+v, %v", out, resp, err)
	}
	if got, err := DecodeResponse(out); err != nil || !reflect.DeepEqual(got, resp) {
		t.Errorf("DecodeResponse(%s) = %+v, %v", out, got, err)
	}
}

func TestBinaryRefusesBadEnvelopes(t *testing.T) {
	good := EncodeRequest(requests[2])
	for _, c := range []struct {
		data  []byte
		field string
	}{
		{[]byte{binaryV1}, "method"},
		{[]byte{binaryV1, 5, 'G'}, "method"},
		{[]byte{binaryV1, 0, 0x80}, "path"},
		{[]byte{binaryV1, 0, 0, 0, 9, 1, 'k'}, "header count"},
		{[]byte{binaryV1, 0, 0, 0, 2, 1, 'k', 0, 1, 'k', 0}, "header key"},
		{[]byte{binaryV1, 0, 0, 0, 1, 1, 'k', 3, 'v'}, "header value"},
		{good[:5], "path"},
		{[]byte("{not json"), "request"},
	} {
		if _, _, err := DecodeRequest(c.data); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%q: %v, want an error naming %s", c.data, err, c.field)
		}
	}
	for _, data := range [][]byte{[]byte(`{"code":-1}`), []byte(`{"code":1000}`), {binaryV1}, {binaryV1, 0xe8, 0x07}, {binaryV1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}} {
		if _, err := DecodeResponse(data); err == nil || !strings.Contains(err.Error(), "code") {
			t.Errorf("%x: %v, want an error naming the code", data, err)
		}
	}
}

// Whatever the decoder accepts, in either form, encodes to a binary envelope that decodes to
// the same request; it never panics.
func FuzzDecodeRequest(f *testing.F) {
	for _, req := range requests {
		f.Add(EncodeRequest(req))
		j, _ := json.Marshal(req)
		f.Add(j)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, _, err := DecodeRequest(data)
		if err != nil {
			return
		}
		again := EncodeRequest(req)
		got, form, err := DecodeRequest(again)
		if err != nil || form != FormBinary || !sameRequest(got, req) {
			t.Fatalf("%+v round-tripped to %+v, %v", req, got, err)
		}
	})
}

// sameRequest: equal, with no body and no header the same however they were spelt.
func sameRequest(a, b Request) bool {
	return a.Method == b.Method && a.Path == b.Path && a.ContentType == b.ContentType &&
		bytes.Equal(a.Body, b.Body) && maps.Equal(a.Header, b.Header)
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add(EncodeResponse(Response{Code: 200, Body: []byte("{}")}, FormBinary))
	f.Add(EncodeResponse(Response{Code: 200, Body: []byte("{}")}, FormJSON))
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := DecodeResponse(data)
		if err != nil {
			return
		}
		if got, err := DecodeResponse(EncodeResponse(resp, FormBinary)); err != nil || got.Code != resp.Code || !bytes.Equal(got.Body, resp.Body) {
			t.Fatalf("%+v round-tripped to %+v, %v", resp, got, err)
		}
	})
}
