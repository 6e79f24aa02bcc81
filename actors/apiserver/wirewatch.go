package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// A watch that arrives over NATS request/reply is a long poll, not a stream: the request names
// the revision to resume from, the reply carries the events after it (at least one, or none
// when timeoutSeconds passes first) as one apiwire.WatchBatch, and the caller asks again from
// the last revision it got. Each reply is whole, so a lost one is asked for again and nothing
// is skipped or applied twice; the server keeps nothing per watcher between polls, so a caller
// that goes away costs nothing, and an apiserver restart is one failed poll, retried.
const (
	pollDefault   = 20 * time.Second
	pollMax       = 25 * time.Second // below the NATS request timeout callers use (30 s)
	pollBodyBytes = 512 << 10        // well under NATS's max payload; the rest is the next poll's
)

type wirePollKey struct{}

func withWirePoll(ctx context.Context) context.Context {
	return context.WithValue(ctx, wirePollKey{}, true)
}

func isWirePoll(ctx context.Context) bool { return ctx.Value(wirePollKey{}) != nil }

// serveWatchPoll answers one poll of a watch over NATS (see above).
func (s *Server) serveWatchPoll(w http.ResponseWriter, r *http.Request, k *schemas.Kind, info requestInfo) {
	sel, err := watchSelector(k, info)
	if err != nil {
		writeError(w, err)
		return
	}
	opts, explicitInitial, err := watchOptionsFor(info)
	if err == nil && opts.SendInitial {
		err = badRequest("resourceVersion: a watch over NATS resumes from a revision; list first, then watch from the list's resourceVersion")
	}
	if err != nil {
		writeError(w, err)
		return
	}
	timeout := pollDefault
	if t, err := strconv.Atoi(info.query.Get("timeoutSeconds")); err == nil && t > 0 {
		timeout = min(time.Duration(t)*time.Second, pollMax)
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	watcher, err := s.log.Watch(ctx, schemas.StoragePrefix(k, info.namespace), opts)
	if err == nil {
		defer watcher.Stop()
	}
	if errors.Is(err, statelog.ErrExpired) {
		writeError(w, apierrors.NewResourceExpired("too old resource version: "+formatRev(opts.FromRev)+" ("+formatRev(s.log.OldestWatchRev())+")"))
		return
	}
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	line := httptest.NewRecorder()
	enc := &eventWriter{w: line, kind: k, now: s.now, shared: s.events}
	var body bytes.Buffer
	body.WriteString(`{"events":[`)
	n := 0
	events := watcher.Events()
	for body.Len() < pollBodyBytes {
		var ev statelog.Event
		var ok bool
		select {
		case ev, ok = <-events:
		default:
			if n > 0 {
				ok = false // nothing more is waiting: the poll has its answer
				break
			}
			ev, ok = <-events
		}
		if !ok {
			break
		}
		line.Body.Reset()
		enc.write(ev, sel, explicitInitial)
		if line.Body.Len() == 0 {
			continue // not this watcher's
		}
		if n > 0 {
			body.WriteByte(',')
		}
		n++
		appendTraced(&body, line.Body.Bytes(), ev.Header)
	}
	if n == 0 && errors.Is(watcher.Err(), statelog.ErrExpired) {
		writeError(w, apierrors.NewResourceExpired("too old resource version: "+formatRev(opts.FromRev)))
		return
	}
	body.WriteString(`]}`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body.Bytes())
}

// appendTraced appends one watch line ({"type":…,"object":…}\n) with the trace context of the
// write that made it, so the work it causes on the caller continues that write's trace.
func appendTraced(b *bytes.Buffer, line []byte, h statelog.Header) {
	line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("}"))
	b.Write(line)
	trace := map[string]string{}
	for _, key := range []string{"traceparent", "tracestate"} {
		if v := h.Get(key); v != "" {
			trace[key] = v
		}
	}
	if len(trace) > 0 {
		data, _ := json.Marshal(trace)
		b.WriteString(`,"trace":`)
		b.Write(data)
	}
	b.WriteByte('}')
}
