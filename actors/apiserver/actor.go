package apiserver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/skiff-sh/skiff/actors/apiwire"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/bus/rpc"
)

// ActorConfig configures the apiserver actor.
type ActorConfig struct {
	Server   *Server
	Listener net.Listener // HTTP; nil = no HTTP endpoint. A restarted actor re-listens on its address.
	TLS      *tls.Config  // serve HTTPS on Listener with this; nil = plain HTTP
	NATS     *nats.Conn   // request/reply endpoint; nil = none
	Logger   *slog.Logger

	listenerUsed bool
}

// apiActor owns the HTTP and NATS endpoints; requests are served concurrently by them, while
// the actor gives the endpoints a supervised lifecycle.
type apiActor struct {
	cfg  *ActorConfig
	http *http.Server
	subs []*nats.Subscription
}

// NewActor returns the producer of the apiserver actor.
func NewActor(cfg ActorConfig) func() actorkit.Actor {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	shared := &cfg
	return func() actorkit.Actor { return &apiActor{cfg: shared} }
}

func (a *apiActor) Receive(ctx actorkit.Context) {
	switch ctx.Message().(type) {
	case *actorkit.Started:
		if err := a.start(); err != nil {
			panic(err) // the supervisor restarts us
		}
		srv := a.cfg.Server
		actorkit.Go(ctx, "pods by node", func(ctx context.Context) { srv.pods.run(ctx, srv.log) })
		actorkit.Go(ctx, "custom resource definitions", func(ctx context.Context) { srv.crds.Run(ctx, srv.log) })
		srv.serving.Store(true)
	case *actorkit.Stopping, *actorkit.Restarting:
		a.stop()
	case *actorkit.Crash:
		panic("apiserver: crash requested by test hook")
	}
}

func (a *apiActor) start() error {
	a.cfg.Server.starts.Add(1)
	if a.cfg.Listener != nil {
		ln, err := a.listener()
		if err != nil {
			return err
		}
		if a.cfg.TLS != nil {
			ln = tls.NewListener(ln, a.cfg.TLS)
		}
		a.http = a.cfg.Server.httpServer()
		srv := a.http
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
				a.cfg.Logger.Error("apiserver http", "err", err)
			}
		}()
	}
	if a.cfg.NATS != nil {
		for _, subj := range []string{apiwire.Subject, apiwire.Subject + ".>"} {
			sub, err := rpc.Serve(a.cfg.NATS, subj, "apiserver", a.serveWire)
			if err != nil {
				return fmt.Errorf("apiserver: serve %s: %w", subj, err)
			}
			a.subs = append(a.subs, sub)
		}
	}
	return nil
}

func (a *apiActor) stop() {
	a.cfg.Server.serving.Store(false) // first: no in-process request enters what is stopping
	if a.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = a.http.Shutdown(ctx)
		cancel()
		a.http = nil
	}
	// Drain answers what was already delivered, so no caller waits out its deadline.
	for _, sub := range a.subs {
		_ = sub.Drain()
	}
	a.subs = nil
}

// serveWire runs a NATS-borne request through the HTTP handler as the subject's identity, and
// answers in the request's form: binary, or the JSON envelope of agents of earlier releases.
func (a *apiActor) serveWire(ctx context.Context, subject string, data []byte, h nats.Header) ([]byte, nats.Header, error) {
	ctx, role, err := asCaller(ctx, subject)
	if err != nil {
		return nil, nil, err
	}
	if req, ok := apiwire.RequestFromMsg(data, h); ok {
		body, rh := a.cfg.Server.ServeRequest(ctx, withUserAgent(req, role)).Msg()
		return body, rh, nil
	}
	var req apiwire.Request
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, nil, fmt.Errorf("apiserver: bad wire request: %w", err)
	}
	return a.cfg.Server.ServeWire(ctx, withUserAgent(req, role)), nil, nil
}

// listener returns the configured listener the first time; after a restart (Shutdown closed
// it) it binds the same address again.
func (a *apiActor) listener() (net.Listener, error) {
	if a.cfg.Listener == nil {
		return nil, errors.New("no listener")
	}
	if !a.cfg.listenerUsed {
		a.cfg.listenerUsed = true
		return a.cfg.Listener, nil
	}
	ln, err := net.Listen(a.cfg.Listener.Addr().Network(), a.cfg.Listener.Addr().String())
	if err != nil {
		return nil, fmt.Errorf("apiserver: listen again on %s: %w", a.cfg.Listener.Addr(), err)
	}
	return ln, nil
}

// Starts counts how often the apiserver actor has started (1 + restarts).
func (s *Server) Starts() int64 { return s.starts.Load() }
