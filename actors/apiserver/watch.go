package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// initialEventsEnd marks the bookmark that closes a sendInitialEvents watch (WatchList).
const initialEventsEnd = "k8s.io/initial-events-end"

type watchEvent struct {
	Type   watch.EventType `json:"type"`
	Object json.RawMessage `json:"object"`
}

// serveWatch streams events as newline-delimited JSON, the way kube-apiserver does.
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, k *schemas.Kind, info requestInfo) {
	sel, err := parseSelectors(info)
	if err == nil {
		err = sel.validateFields(k.New())
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if info.name != "" { // /watch/.../pods/NAME
		sel.field = fields.AndSelectors(sel.field, fields.OneTermEqualSelector("metadata.name", info.name))
	}
	opts, explicitInitial, err := watchOptionsFor(info)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), watchTimeout(info))
	defer cancel()
	watcher, err := s.log.Watch(ctx, schemas.StoragePrefix(k, info.namespace), opts)
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(http.StatusOK)
	enc := &eventWriter{w: w, flusher: flusher, table: wantsTable(r), kind: k, now: s.now}
	if err != nil {
		enc.writeError(err, opts.FromRev, s.log.CompactedRev())
		return
	}
	defer watcher.Stop()
	if flusher != nil {
		flusher.Flush()
	}
	for ev := range watcher.Events() {
		if !enc.write(ev, sel, explicitInitial) {
			return
		}
	}
	if err := watcher.Err(); errors.Is(err, statelog.ErrExpired) {
		enc.writeError(err, opts.FromRev, s.log.CompactedRev())
	}
}

func watchOptionsFor(info requestInfo) (statelog.WatchOptions, bool, error) {
	opts := statelog.WatchOptions{Bookmarks: info.query.Get("allowWatchBookmarks") == "true"}
	sendInitial := info.query.Get("sendInitialEvents") == "true"
	rv, err := parseRV(info.query.Get("resourceVersion"))
	if err != nil {
		return opts, false, err
	}
	switch {
	case sendInitial:
		opts.SendInitial = true
		opts.Bookmarks = true // the initial-events-end bookmark is the WatchList contract
	case rv == 0:
		// Kubernetes: an unset or "0" resourceVersion starts with synthetic ADDED events.
		opts.SendInitial = true
	default:
		opts.FromRev = rv
	}
	return opts, sendInitial, nil
}

// watchTimeout follows timeoutSeconds, else spreads watches over 30-60 minutes so that
// clients do not all reconnect at once.
func watchTimeout(info requestInfo) time.Duration {
	if t, err := strconv.Atoi(info.query.Get("timeoutSeconds")); err == nil && t > 0 {
		return time.Duration(t) * time.Second
	}
	return 30*time.Minute + time.Duration(rand.Int64N(int64(30*time.Minute)))
}

type eventWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	table   bool
	kind    *schemas.Kind
	now     func() time.Time
}

// write translates one log event for this watcher's selector: an update that moves an object
// out of the selector is a DELETED for this watcher, one that moves it in is an ADDED.
func (e *eventWriter) write(ev statelog.Event, sel selector, explicitInitial bool) bool {
	switch ev.Type {
	case statelog.EventBookmark:
		if ev.InitialEnd && !explicitInitial {
			return true
		}
		return e.emit(watch.Bookmark, e.bookmark(ev))
	case statelog.EventDelete:
		obj, err := decodeStored(e.kind, ev.Value, ev.Rev)
		if err != nil || !sel.matches(obj) {
			return true
		}
		return e.emit(watch.Deleted, obj)
	}
	obj, err := decodeStored(e.kind, ev.Value, ev.Rev)
	if err != nil {
		return true
	}
	var prev runtime.Object
	if ev.PrevRev != 0 && len(ev.PrevValue) > 0 && !sel.everything() {
		prev, _ = decodeStored(e.kind, ev.PrevValue, ev.PrevRev)
	}
	now := sel.matches(obj)
	was := ev.PrevRev != 0 && (sel.everything() || sel.matches(prev))
	switch {
	case now && was:
		return e.emit(watch.Modified, obj)
	case now:
		return e.emit(watch.Added, obj)
	case was:
		return e.emit(watch.Deleted, obj)
	}
	return true
}

func (e *eventWriter) bookmark(ev statelog.Event) runtime.Object {
	obj := e.kind.New()
	setTypeMeta(obj, e.kind)
	m := mustMeta(obj)
	m.SetResourceVersion(formatRev(ev.Rev))
	if ev.InitialEnd {
		m.SetAnnotations(map[string]string{initialEventsEnd: "true"})
	}
	return obj
}

func (e *eventWriter) emit(t watch.EventType, obj runtime.Object) bool {
	if e.table && t != watch.Bookmark {
		obj = schemas.Table(e.kind, []runtime.Object{obj}, e.now())
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return true
	}
	line, _ := json.Marshal(watchEvent{Type: t, Object: data})
	if _, err := e.w.Write(append(line, '\n')); err != nil {
		return false
	}
	if e.flusher != nil {
		e.flusher.Flush()
	}
	return true
}

// writeError ends the stream with an ERROR event; an expired revision is 410 Gone, on which
// informers relist.
func (e *eventWriter) writeError(err error, from, compacted uint64) {
	var st *metav1.Status
	if errors.Is(err, statelog.ErrExpired) {
		st = toStatus(apierrors.NewResourceExpired("too old resource version: " + formatRev(from) + " (" + formatRev(compacted) + ")"))
	} else {
		st = toStatus(apierrors.NewInternalError(err))
	}
	data, _ := json.Marshal(st)
	line, _ := json.Marshal(watchEvent{Type: watch.Error, Object: data})
	_, _ = e.w.Write(append(line, '\n'))
	if e.flusher != nil {
		e.flusher.Flush()
	}
}
