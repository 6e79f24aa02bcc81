// Package apiclient is how Skiff's actors and CLI talk to the apiserver: over NATS
// request/reply inside the cluster, over HTTP from outside, with the same paths and bodies.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/skiff-sh/skiff/actors/apiwire"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/bus/rpc"
	"github.com/skiff-sh/skiff/schemas"
)

// Transport carries one API request.
type Transport interface {
	Do(ctx context.Context, req apiwire.Request) (apiwire.Response, error)
}

// WatchPoller is a Transport over which a watch is a long poll answered with one
// apiwire.WatchBatch (the apiserver's wire form: NATS and Direct), not a stream (HTTP.Stream).
type WatchPoller interface {
	Transport
	PollsWatches()
}

// NATS sends requests to the apiserver actor over NATS request/reply.
type NATS struct {
	Conn *nats.Conn
	// Subject names the caller (identity.ID.APISubject, e.g. skiff.api.node_<name>); on secured
	// NATS only that identity may publish there. "" = apiwire.Subject, the in-process caller.
	Subject string
}

func (t NATS) Do(ctx context.Context, req apiwire.Request) (apiwire.Response, error) {
	data, h := withTraceContext(ctx, req).Msg()
	out, rh, err := rpc.Call(ctx, t.Conn, subjectOr(t.Subject), data, h) // bounded by rpc.DefaultTimeout
	if err != nil {
		return apiwire.Response{}, err
	}
	return apiwire.ResponseFromMsg(out, rh)
}

func (NATS) PollsWatches() {}

// LocalServer is an apiserver running in this process (apiserver.Server).
type LocalServer interface {
	// ServeLocal answers req as the NATS endpoint answers it on subject, without the wire.
	ServeLocal(ctx context.Context, subject string, req apiwire.Request) (apiwire.Response, error)
}

// Direct calls the apiserver of its own process: the same identity, handler chain, answers
// and errors as over NATS (a stopped apiserver is rpc.ErrNoResponders), without the round
// trip through the NATS server and the JSON envelope. The request runs on the caller's
// goroutine.
type Direct struct {
	Server  LocalServer
	Subject string // as NATS.Subject: who the caller is
	// Fallback (optional) carries the requests the local apiserver refuses while it does not
	// serve, as NATS would have carried them to another replica of a shared queue group.
	Fallback Transport
}

func (t Direct) Do(ctx context.Context, req apiwire.Request) (apiwire.Response, error) {
	ctx, cancel := rpc.WithDefaultTimeout(ctx) // as rpc.Call bounds a NATS request
	defer cancel()
	resp, err := t.Server.ServeLocal(ctx, subjectOr(t.Subject), withTraceContext(ctx, req))
	if t.Fallback != nil && errors.Is(err, rpc.ErrNoResponders) {
		return t.Fallback.Do(ctx, req)
	}
	return resp, err
}

func (Direct) PollsWatches() {}

// withTraceContext adds the caller's W3C trace context to req.Header, where the apiserver
// continues it from.
func withTraceContext(ctx context.Context, req apiwire.Request) apiwire.Request {
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	if len(carrier) == 0 {
		return req
	}
	for k, v := range req.Header {
		carrier[k] = v
	}
	req.Header = carrier
	return req
}

func subjectOr(subject string) string {
	if subject == "" {
		return apiwire.Subject
	}
	return subject
}

// HTTP sends requests to the apiserver's HTTP endpoint.
type HTTP struct {
	Server string // e.g. http://127.0.0.1:6443
	Client *http.Client
	Token  string
}

func (t HTTP) client() *http.Client {
	if t.Client != nil {
		return t.Client
	}
	return http.DefaultClient
}

func (t HTTP) newRequest(ctx context.Context, req apiwire.Request) (*http.Request, error) {
	r, err := http.NewRequestWithContext(ctx, req.Method, strings.TrimRight(t.Server, "/")+req.Path, bytes.NewReader(req.Body))
	if err != nil {
		return nil, err
	}
	if req.ContentType != "" {
		r.Header.Set("Content-Type", req.ContentType)
	}
	for k, v := range req.Header {
		r.Header.Set(k, v)
	}
	if t.Token != "" {
		r.Header.Set("Authorization", "Bearer "+t.Token)
	}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(r.Header))
	return r, nil
}

func (t HTTP) Do(ctx context.Context, req apiwire.Request) (apiwire.Response, error) {
	r, err := t.newRequest(ctx, req)
	if err != nil {
		return apiwire.Response{}, err
	}
	resp, err := t.client().Do(r)
	if err != nil {
		return apiwire.Response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return apiwire.Response{Code: resp.StatusCode, Body: body}, err
}

// Stream opens a long-lived GET (watch) and returns its body; accept sets the Accept header.
func (t HTTP) Stream(ctx context.Context, path, accept string) (io.ReadCloser, error) {
	r, err := t.newRequest(ctx, apiwire.Request{Method: http.MethodGet, Path: path})
	if err != nil {
		return nil, err
	}
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	resp, err := t.client().Do(r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return nil, decodeError(resp.StatusCode, body)
	}
	return resp.Body, nil
}

// Client is a typed API client over any Transport.
type Client struct{ T Transport }

// Path builds the REST path of a kind's collection or object (and subresource).
func Path(k *schemas.Kind, namespace, name, sub string) string {
	var b strings.Builder
	if k.GVK.Group == "" {
		b.WriteString("/api/" + k.GVK.Version)
	} else {
		b.WriteString("/apis/" + k.GVK.Group + "/" + k.GVK.Version)
	}
	if k.Namespaced && namespace != "" {
		b.WriteString("/namespaces/" + url.PathEscape(namespace))
	}
	b.WriteString("/" + k.Resource)
	if name != "" {
		b.WriteString("/" + url.PathEscape(name))
	}
	if sub != "" {
		b.WriteString("/" + sub)
	}
	return b.String()
}

// maxThrottledRetries is how often a request refused with 429 is sent again (client-go's).
const maxThrottledRetries = 10

// Raw performs one request and returns the body of a 2xx answer, or the API error. A 429 (the
// caller's budget is spent; nothing was done) is retried after the wait it names, as client-go
// does.
func (c *Client) Raw(ctx context.Context, method, path, contentType string, body []byte) ([]byte, error) {
	return c.Do(ctx, apiwire.Request{Method: method, Path: path, ContentType: contentType, Body: body})
}

// Do is Raw for a request with headers of its own.
func (c *Client) Do(ctx context.Context, req apiwire.Request) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		resp, err := c.T.Do(ctx, req)
		if err != nil {
			return nil, err
		}
		if resp.Code >= 200 && resp.Code <= 299 {
			return resp.Body, nil
		}
		err = decodeError(resp.Code, resp.Body)
		wait, throttled := apierrors.SuggestsClientDelay(err)
		if resp.Code != http.StatusTooManyRequests || !throttled || attempt == maxThrottledRetries {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Duration(wait) * time.Second):
		}
	}
}

func decodeError(code int, body []byte) error {
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
		return &apierrors.StatusError{ErrStatus: st}
	}
	return apierrors.NewGenericServerResponse(code, "", schema.GroupResource{}, "", strings.TrimSpace(string(body)), 0, false)
}

// object performs a request answered with one object of kind k, asked for in protobuf where k
// has it (the server answers JSON otherwise, and errors always).
func (c *Client) object(ctx context.Context, k *schemas.Kind, method, path, contentType string, body []byte) (runtime.Object, error) {
	out, err := c.Do(ctx, objectRequest(k, method, path, contentType, body))
	if err != nil {
		return nil, err
	}
	return decodeObject(k, out)
}

func objectRequest(k *schemas.Kind, method, path, contentType string, body []byte) apiwire.Request {
	req := apiwire.Request{Method: method, Path: path, ContentType: contentType, Body: body}
	if schemas.HasProtobuf(k) {
		req.Header = map[string]string{"Accept": acceptProtobuf}
	}
	return req
}

// acceptProtobuf asks for protobuf and takes JSON, as Kubernetes' components ask.
const acceptProtobuf = schemas.ContentTypeProtobuf + ", application/json"

// decodeObject decodes an answer of kind k: protobuf (told by its magic, which no JSON
// document starts with) or JSON.
func decodeObject(k *schemas.Kind, out []byte) (runtime.Object, error) {
	if schemas.IsProtobuf(out) {
		return schemas.DecodeProtobuf(k, out)
	}
	obj := k.New()
	if err := json.Unmarshal(out, obj); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", k.GVK.Kind, err)
	}
	return obj, nil
}

func kindOf(obj runtime.Object) (*schemas.Kind, error) {
	k, ok := schemas.ByGVK(obj.GetObjectKind().GroupVersionKind())
	if !ok {
		// Typed objects often travel without TypeMeta: look the Go type up in the scheme.
		gvks, _, err := schemas.Scheme.ObjectKinds(obj)
		if err != nil || len(gvks) == 0 {
			return nil, fmt.Errorf("unknown kind for %T", obj)
		}
		if k, ok = schemas.ByGVK(gvks[0]); !ok {
			return nil, fmt.Errorf("kind %s is not served", gvks[0])
		}
	}
	return k, nil
}

func metaOf(obj runtime.Object) metav1.Object {
	m, _ := obj.(metav1.Object)
	return m
}

// Get reads one object.
func (c *Client) Get(ctx context.Context, k *schemas.Kind, namespace, name string) (runtime.Object, error) {
	return c.object(ctx, k, http.MethodGet, Path(k, namespace, name, ""), "", nil)
}

// Create writes a new object.
func (c *Client) Create(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	return c.write(ctx, http.MethodPost, obj, false, "")
}

// CreateMeta creates obj and decodes only the metadata of the answer, for a caller that
// needs the name given and learns the rest from a watch (a controller creating pods).
func (c *Client) CreateMeta(ctx context.Context, obj runtime.Object) (*metav1.ObjectMeta, error) {
	k, out, err := c.send(ctx, http.MethodPost, obj, false, "")
	if err != nil {
		return nil, err
	}
	var m metav1.PartialObjectMetadata
	if schemas.IsProtobuf(out) {
		// The object's metadata is field 1 of its message, as of PartialObjectMetadata's:
		// the rest is skipped undecoded.
		err = schemas.UnmarshalProtobuf(out, k.GVK, true, &m)
	} else {
		err = json.Unmarshal(out, &m)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding %s metadata: %w", k.GVK.Kind, err)
	}
	return &m.ObjectMeta, nil
}

// Update replaces an object; with its resourceVersion set, a stale write is a 409.
func (c *Client) Update(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	return c.write(ctx, http.MethodPut, obj, true, "")
}

// UpdateStatus replaces an object's status.
func (c *Client) UpdateStatus(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	return c.write(ctx, http.MethodPut, obj, true, "status")
}

// PutStatus replaces an object's status as UpdateStatus does, and leaves the answer undecoded
// (for a caller that learns the written object from a watch anyway).
func (c *Client) PutStatus(ctx context.Context, obj runtime.Object) error {
	_, _, err := c.send(ctx, http.MethodPut, obj, true, "status")
	return err
}

func (c *Client) write(ctx context.Context, method string, obj runtime.Object, named bool, sub string) (runtime.Object, error) {
	k, out, err := c.send(ctx, method, obj, named, sub)
	if err != nil {
		return nil, err
	}
	return decodeObject(k, out)
}

// send writes obj (writeRequest) and returns its kind and the answer's body.
func (c *Client) send(ctx context.Context, method string, obj runtime.Object, named bool, sub string) (*schemas.Kind, []byte, error) {
	k, req, err := writeRequest(method, obj, named, sub)
	if err != nil {
		return nil, nil, err
	}
	out, err := c.Do(ctx, req)
	return k, out, err
}

// writeRequest is the request writing obj: its body in protobuf for a kind that has it (as
// Kubernetes' components write), else JSON.
func writeRequest(method string, obj runtime.Object, named bool, sub string) (*schemas.Kind, apiwire.Request, error) {
	k, err := kindOf(obj)
	if err != nil {
		return nil, apiwire.Request{}, err
	}
	obj.GetObjectKind().SetGroupVersionKind(k.GVK)
	m := metaOf(obj)
	name := ""
	if named {
		name = m.GetName()
	}
	path := Path(k, m.GetNamespace(), name, sub)
	body, pb, err := schemas.EncodeProtobuf(obj)
	if err != nil {
		return nil, apiwire.Request{}, err
	}
	if pb && k.Custom == nil {
		return k, objectRequest(k, method, path, schemas.ContentTypeProtobuf, body), nil
	}
	if body, err = json.Marshal(obj); err != nil {
		return nil, apiwire.Request{}, err
	}
	return k, objectRequest(k, method, path, "application/json", body), nil
}

// Patch applies a patch of the given content type (e.g. application/merge-patch+json).
func (c *Client) Patch(ctx context.Context, k *schemas.Kind, namespace, name, sub, patchType string, patch []byte) (runtime.Object, error) {
	return c.object(ctx, k, http.MethodPatch, Path(k, namespace, name, sub), patchType, patch)
}

// Delete deletes an object with the given options (nil = defaults).
func (c *Client) Delete(ctx context.Context, k *schemas.Kind, namespace, name string, opts *metav1.DeleteOptions) error {
	var body []byte
	if opts != nil {
		body, _ = json.Marshal(opts)
	}
	_, err := c.Raw(ctx, http.MethodDelete, Path(k, namespace, name, ""), "application/json", body)
	return err
}

// Bind assigns a pod to a node through the binding subresource.
func (c *Client) Bind(ctx context.Context, namespace, pod, node string) error {
	k, _ := schemas.ByResource("", "v1", "pods")
	body, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Binding",
		"metadata": map[string]string{"name": pod, "namespace": namespace},
		"target":   map[string]string{"kind": "Node", "name": node},
	})
	_, err := c.Raw(ctx, http.MethodPost, Path(k, namespace, pod, "binding"), "application/json", body)
	return err
}

// Evict asks for a pod's eviction (pods/eviction, policy/v1), which PodDisruptionBudgets may
// refuse with 429 TooManyRequests; opts (may be nil) are the pod's delete options.
func (c *Client) Evict(ctx context.Context, namespace, pod string, opts *metav1.DeleteOptions) error {
	k, _ := schemas.ByResource("", "v1", "pods")
	body, _ := json.Marshal(map[string]any{
		"apiVersion": "policy/v1", "kind": "Eviction",
		"metadata":      map[string]string{"name": pod, "namespace": namespace},
		"deleteOptions": opts,
	})
	_, err := c.Raw(ctx, http.MethodPost, Path(k, namespace, pod, "eviction"), "application/json", body)
	return err
}

// List reads a collection; query holds labelSelector, fieldSelector, resourceVersion.
func (c *Client) List(ctx context.Context, k *schemas.Kind, namespace string, query url.Values) ([]runtime.Object, string, error) {
	p := Path(k, namespace, "", "")
	if len(query) > 0 {
		p += "?" + query.Encode()
	}
	out, err := c.Raw(ctx, http.MethodGet, p, "", nil)
	if err != nil {
		return nil, "", err
	}
	var l struct {
		Metadata metav1.ListMeta   `json:"metadata"`
		Items    []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(out, &l); err != nil {
		return nil, "", err
	}
	objs := make([]runtime.Object, 0, len(l.Items))
	for _, raw := range l.Items {
		obj := k.New()
		if err := json.Unmarshal(raw, obj); err != nil {
			return nil, "", err
		}
		obj.GetObjectKind().SetGroupVersionKind(k.GVK)
		objs = append(objs, obj)
	}
	return objs, l.Metadata.ResourceVersion, nil
}

// WatchPoll asks once for the events of a watch after query's resourceVersion: over NATS (and
// Direct) a watch is a long poll answered with one apiwire.WatchBatch (at least one event, or none once
// the poll's timeoutSeconds passed). HTTP callers stream watches instead (HTTP.Stream).
func (c *Client) WatchPoll(ctx context.Context, k *schemas.Kind, namespace string, query url.Values) (*apiwire.WatchBatch, error) {
	if _, ok := c.T.(WatchPoller); !ok {
		return nil, fmt.Errorf("apiclient: a watch poll needs a transport that polls watches (NATS, Direct), not %T", c.T)
	}
	q := url.Values{}
	for key, v := range query {
		q[key] = v
	}
	q.Set("watch", "true")
	out, err := c.Raw(ctx, http.MethodGet, Path(k, namespace, "", "")+"?"+q.Encode(), "", nil)
	if err != nil {
		return nil, err
	}
	var b apiwire.WatchBatch
	if err := json.Unmarshal(out, &b); err != nil {
		return nil, fmt.Errorf("apiclient: watch poll answer: %w", err)
	}
	return &b, nil
}
