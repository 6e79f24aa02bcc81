package apiserver

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Timeouts bound how long a client may hold a connection without making progress; zero
// fields take the defaults. There is deliberately no whole-request read or write timeout:
// watches, logs -f and exec streams live as long as their client wants.
type Timeouts struct {
	// ReadHeader: a request's headers must arrive within this (slowloris). Default 10s.
	ReadHeader time.Duration
	// BodyRead: a request's body must arrive within this from the end of its headers, else
	// 408 and the connection is closed. Default 30s (3 MiB over 1 Mbit/s takes 25s).
	BodyRead time.Duration
	// Idle: a keep-alive connection with no request is closed after this. Default 90s, as
	// kube-apiserver.
	Idle time.Duration
}

// Default timeouts.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultBodyReadTimeout   = 30 * time.Second
	DefaultIdleTimeout       = 90 * time.Second
	maxHeaderBytes           = 1 << 20 // kube-apiserver's
)

func (t Timeouts) withDefaults() Timeouts {
	if t.ReadHeader <= 0 {
		t.ReadHeader = DefaultReadHeaderTimeout
	}
	if t.BodyRead <= 0 {
		t.BodyRead = DefaultBodyReadTimeout
	}
	if t.Idle <= 0 {
		t.Idle = DefaultIdleTimeout
	}
	return t
}

// httpServer is the HTTP server of the API with its timeouts.
func (s *Server) httpServer() *http.Server {
	t := s.opts.Timeouts
	return &http.Server{Handler: s.Handler(), ReadHeaderTimeout: t.ReadHeader, IdleTimeout: t.Idle, MaxHeaderBytes: maxHeaderBytes}
}

// bodyDeadline gives every request that carries a body a read deadline, so a body trickling in
// (or one the handler never reads, which net/http drains after it) cannot hold the connection
// and its buffer for long. readBody lifts it once the body is in, so that a stream the request
// then becomes (exec) has none. Requests without a body (watches) get no deadline at all.
func (s *Server) bodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			// Not supported (NATS requests: the body is already in memory) is fine.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opts.Timeouts.BodyRead))
		}
		next.ServeHTTP(w, r)
	})
}

// bodyTimedOut is the answer to a body that did not arrive in time: 408, and the connection is
// closed (what is left of the body will never be read).
func (s *Server) bodyTimedOut(w http.ResponseWriter) error {
	w.Header().Set("Connection", "close")
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusRequestTimeout,
		Reason:  metav1.StatusReasonTimeout,
		Message: "the request body did not arrive within " + s.opts.Timeouts.BodyRead.String()}}
}

// readBody reads at most limit bytes under the body deadline, then lifts the deadline; a larger
// body is refused whole with 413.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	limit := s.opts.MaxBodyBytes
	if b, ok := r.Body.(wireBody); ok && b.Len() == len(b.data) {
		if int64(len(b.data)) > limit {
			return nil, tooLarge(limit)
		}
		return b.data, nil
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, s.bodyTimedOut(w)
	}
	if err != nil {
		return nil, badRequest("reading request body: %v", err)
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	if int64(len(data)) > limit {
		return nil, tooLarge(limit)
	}
	return data, nil
}

func tooLarge(limit int64) error {
	return apierrors.NewRequestEntityTooLargeError("limit is " + formatRev(uint64(limit)) + " bytes")
}
