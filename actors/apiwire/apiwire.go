// Package apiwire is the wire form of an API call carried over NATS: what the apiserver serves
// and what apiclient sends. A leaf package, so clients need not import the server.
package apiwire

import (
	"encoding/json"

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
