// Package apiwire is the wire form of an API call carried over NATS: what the apiserver serves
// and what apiclient sends. A leaf package, so clients need not import the server.
package apiwire

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/skiff-sh/skiff/bus/identity"
)

// Subject is where the apiserver answers API requests over NATS: callers append their identity
// (identity.ID.APISubject), which becomes the request's authenticated user.
const Subject = identity.APIPrefix

// Request is one API call: the same method, path and body as over HTTP, so one handler serves
// both.
type Request struct {
	Method      string `json:"method"`
	Path        string `json:"path"` // with the query string
	ContentType string `json:"contentType,omitempty"`
	Body        []byte `json:"body,omitempty"`
	// Header carries the caller's W3C trace context (traceparent, tracestate).
	Header map[string]string `json:"header,omitempty"`
}

// Response is the answer to a Request.
type Response struct {
	Code int    `json:"code"`
	Body []byte `json:"body,omitempty"`
}

// WatchBatch answers a watch sent over NATS: a long poll that returns the events after the
// request's resourceVersion (at least one, or none once timeoutSeconds passed). The caller
// polls again from the last event's revision (a BOOKMARK's included).
type WatchBatch struct {
	Events []WatchEvent `json:"events"`
}

// WatchEvent is one watch event as Kubernetes streams it, plus the trace context of the write
// that made it.
type WatchEvent struct {
	Type   string            `json:"type"`
	Object json.RawMessage   `json:"object"`
	Trace  map[string]string `json:"trace,omitempty"`
}

// The binary wire form: the body is the NATS message's data as it is, and the method, path,
// content type, answer code and the caller's headers travel as NATS headers. (The JSON
// envelope before it carried the body base64-encoded, a third larger, and cost both ends a
// JSON pass over every object: 9% of a simulated node fleet's CPU.) The apiserver still
// answers the envelope, in kind, for agents of earlier releases.
const (
	HdrMethod      = "Skiff-Method"
	HdrPath        = "Skiff-Path"
	HdrContentType = "Content-Type"
	HdrCode        = "Skiff-Code"
)

// wirePrefix marks headers of the wire and its transport (rpc's deadline), which are not the
// caller's HTTP headers.
const wirePrefix = "Skiff-"

// Msg is req in the binary form: the data and header of a NATS message.
func (r Request) Msg() ([]byte, nats.Header) {
	h := make(nats.Header, len(r.Header)+3)
	method := r.Method
	if method == "" {
		method = "GET"
	}
	h.Set(HdrMethod, method)
	h.Set(HdrPath, r.Path)
	if r.ContentType != "" {
		h.Set(HdrContentType, r.ContentType)
	}
	for k, v := range r.Header {
		h.Set(k, v)
	}
	return r.Body, h
}

// RequestFromMsg reads a request in the binary form; ok is false for a message without a
// method header, which is the JSON envelope.
func RequestFromMsg(data []byte, h nats.Header) (req Request, ok bool) {
	method := h.Get(HdrMethod)
	if method == "" {
		return Request{}, false
	}
	req = Request{Method: method, Path: h.Get(HdrPath), ContentType: h.Get(HdrContentType), Body: data}
	for k, vs := range h {
		if strings.HasPrefix(k, wirePrefix) || k == HdrContentType || len(vs) == 0 {
			continue
		}
		if req.Header == nil {
			req.Header = map[string]string{}
		}
		req.Header[k] = vs[0]
	}
	return req, true
}

// Msg is r in the binary form.
func (r Response) Msg() ([]byte, nats.Header) {
	h := nats.Header{}
	h.Set(HdrCode, strconv.Itoa(r.Code))
	return r.Body, h
}

// ResponseFromMsg reads an answer in the binary form.
func ResponseFromMsg(data []byte, h nats.Header) (Response, error) {
	code, err := strconv.Atoi(h.Get(HdrCode))
	if err != nil {
		return Response{}, fmt.Errorf("an answer without a valid %s header (%q): is the apiserver older than this client?", HdrCode, h.Get(HdrCode))
	}
	return Response{Code: code, Body: data}, nil
}
