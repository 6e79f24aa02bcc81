// Package rpc is request/reply over NATS with headers: handlers in a queue
// group (replicas share the load), errors carried back in a header.
package rpc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

const (
	// HdrError carries a handler's error message back to the caller.
	HdrError = "Skiff-Error"
	// HdrErrorCode carries Error.Code (e.g. "NotFound", "Conflict").
	HdrErrorCode = "Skiff-Error-Code"
	// HdrDeadline carries the caller's deadline (Unix nanoseconds) so the
	// handler stops working when nobody waits any more.
	HdrDeadline = "Skiff-Deadline"

	// DefaultTimeout applies to a Call whose context has no deadline.
	DefaultTimeout = 30 * time.Second
)

// ErrNoResponders: nobody serves the subject.
var ErrNoResponders = errors.New("rpc: no responders")

// Error is an error returned by a remote handler. A handler may return one
// to set Code; any other error arrives with an empty Code.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string {
	if e.Code == "" {
		return e.Message
	}
	return e.Code + ": " + e.Message
}

// Handler serves one request. reply and replyHeader are sent even with an
// error (the caller gets both alongside the error).
type Handler func(ctx context.Context, subject string, data []byte, h nats.Header) (reply []byte, replyHeader nats.Header, err error)

// Serve subscribes hd to subject in the queue group queue ("" = no group).
// Each request runs in a goroutine of its own (reused after it, workers.go); a
// panicking handler answers with an error instead of crashing the process.
func Serve(nc *nats.Conn, subject, queue string, hd Handler) (*nats.Subscription, error) {
	w := newWorkers()
	cb := func(m *nats.Msg) { w.run(func() { handle(m, hd) }) }
	if queue == "" {
		return nc.Subscribe(subject, cb)
	}
	return nc.QueueSubscribe(subject, queue, cb)
}

func handle(m *nats.Msg, hd Handler) {
	ctx := context.Background()
	if d, err := strconv.ParseInt(m.Header.Get(HdrDeadline), 10, 64); err == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.Unix(0, d))
		defer cancel()
	}
	reply, rh, err := safeCall(ctx, m, hd)
	if m.Reply == "" || ctx.Err() != nil {
		return // nobody waits for a reply past the caller's deadline
	}
	out := &nats.Msg{Subject: m.Reply, Data: reply, Header: rh}
	if err != nil {
		if out.Header == nil {
			out.Header = nats.Header{}
		}
		var re *Error
		if errors.As(err, &re) {
			out.Header.Set(HdrErrorCode, re.Code)
			out.Header.Set(HdrError, re.Message)
		} else {
			out.Header.Set(HdrError, err.Error())
		}
	}
	_ = m.RespondMsg(out)
}

func safeCall(ctx context.Context, m *nats.Msg, hd Handler) (reply []byte, rh nats.Header, err error) {
	defer func() {
		if p := recover(); p != nil {
			reply, rh, err = nil, nil, PanicError(p)
		}
	}()
	return hd(ctx, m.Subject, m.Data, m.Header)
}

// PanicError is how a request whose handler panicked is answered: an Internal error to its
// caller, not a crash of the serving process.
func PanicError(p any) *Error {
	return &Error{Code: "Internal", Message: fmt.Sprintf("handler panic: %v", p)}
}

// WithDefaultTimeout bounds ctx by DefaultTimeout unless it has a deadline already: no request
// waits for an answer forever.
func WithDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}

// Call sends a request and waits for the reply. A handler error comes back
// as *Error (with the reply data and header, if any).
func Call(ctx context.Context, nc *nats.Conn, subject string, data []byte, h nats.Header) ([]byte, nats.Header, error) {
	ctx, cancel := WithDefaultTimeout(ctx)
	defer cancel()
	dl, _ := ctx.Deadline()
	m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	for k, v := range h {
		m.Header[k] = v
	}
	m.Header.Set(HdrDeadline, strconv.FormatInt(dl.UnixNano(), 10))
	resp, err := nc.RequestMsgWithContext(ctx, m)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, nil, fmt.Errorf("%w on %s", ErrNoResponders, subject)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err() // errors.Is-able, unlike the client's own
		}
		return nil, nil, err
	}
	if msg := resp.Header.Get(HdrError); msg != "" || resp.Header.Get(HdrErrorCode) != "" {
		return resp.Data, resp.Header, &Error{Code: resp.Header.Get(HdrErrorCode), Message: msg}
	}
	return resp.Data, resp.Header, nil
}
