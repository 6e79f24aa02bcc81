package apiserver

import (
	"context"
	"fmt"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/actors/apiwire"
	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/bus/rpc"
)

// ServeLocal answers a request of a component in this process (apiclient.Direct) as the NATS
// endpoint answers the same request on subject: the same identity, User-Agent, handler chain
// and context (the caller's deadline, none of its values: trace context travels in
// req.Header). It saves the round trip through the NATS server and the JSON envelope.
//
// While the apiserver actor does not serve (not yet started, restarting, stopped) it fails as
// a NATS request with no responder does, so callers retry alike; requests already inside
// finish, as a draining subscription answers what it was given.
func (s *Server) ServeLocal(ctx context.Context, subject string, req apiwire.Request) (resp apiwire.Response, err error) {
	if !s.serving.Load() {
		return apiwire.Response{}, fmt.Errorf("%w on %s", rpc.ErrNoResponders, subject)
	}
	sctx, cancel := detach(ctx)
	defer cancel()
	sctx, role, err := asCaller(sctx, subject)
	if err != nil {
		return apiwire.Response{}, err
	}
	// As bus/rpc does for a NATS handler: a panicking request is an error, not a crash of the
	// calling component.
	defer func() {
		if p := recover(); p != nil {
			resp, err = apiwire.Response{}, rpc.PanicError(p)
		}
	}()
	resp = s.ServeRequest(sctx, withUserAgent(req, role))
	// Over NATS nobody is answered past the deadline: the caller sees its context's error.
	if err := ctx.Err(); err != nil {
		return apiwire.Response{}, err
	}
	if err := sctx.Err(); err != nil {
		return apiwire.Response{}, err
	}
	return resp, nil
}

// detach is the server's context of an in-process request: as bus/rpc gives a NATS request,
// none of the caller's values and its deadline; it also ends when the caller gives up, which
// over NATS only stopped the wait for the answer.
func detach(caller context.Context) (context.Context, context.CancelFunc) {
	var ctx context.Context
	var cancel context.CancelFunc
	if dl, ok := caller.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), dl)
	} else {
		ctx, cancel = context.WithCancel(context.Background())
	}
	stop := context.AfterFunc(caller, cancel)
	return ctx, func() { stop(); cancel() }
}

// asCaller is ctx as the caller that API subject names (wireUser); NATS permissions let only
// that identity publish there, and in process the component chose its own.
func asCaller(ctx context.Context, subject string) (context.Context, identity.Role, error) {
	id, err := identity.FromAPISubject(subject)
	if err != nil {
		return nil, "", &rpc.Error{Code: "Unauthorized", Message: err.Error()}
	}
	if id.Role != identity.APIServer {
		ctx = authn.WithUser(ctx, wireUser(id))
	} // else the bare subject: the in-process caller the authentication chain trusts
	return ctx, id.Role, nil
}

// withUserAgent names the component's role in managedFields, as a User-Agent does over HTTP,
// unless the caller named itself.
func withUserAgent(req apiwire.Request, role identity.Role) apiwire.Request {
	if _, ok := req.Header["User-Agent"]; ok {
		return req
	}
	h := make(map[string]string, len(req.Header)+1)
	for k, v := range req.Header {
		h[k] = v
	}
	h["User-Agent"] = "skiff-" + string(role)
	req.Header = h
	return req
}
