package apiserver

import (
	"context"
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

// linePrefix opens a watch line of each event type: {"type":"ADDED","object":
var linePrefix = func() map[watch.EventType][]byte {
	m := map[watch.EventType][]byte{}
	for _, t := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error} {
		m[t] = []byte(`{"type":"` + string(t) + `","object":`)
	}
	return m
}()

var lineEnd = []byte("}\n")

// serveWatch streams events as kube-apiserver does: newline-delimited JSON, or length-prefixed
// protobuf frames when the answer negotiated is protobuf (tables are JSON only); each event's
// object is the object, a table of it or its metadata (a PartialObjectMetadata).
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, k *schemas.Kind, info requestInfo, a answer) {
	sel, err := watchSelector(k, info)
	if err != nil {
		writeError(w, err)
		return
	}
	opts, explicitInitial, err := watchOptionsFor(info)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), watchTimeout(info))
	defer cancel()
	var watcher *statelog.Watcher
	// A snapshot at a revision the view has not reached waits for it at most freshWait, then
	// the stream ends with "Too large resource version", as kube-apiserver's watch cache does;
	// a watch for the changes after a future revision just waits for them.
	if err = s.waitFresh(ctx, initialRev(info, explicitInitial)); err == nil {
		watcher, err = s.log.Watch(ctx, schemas.StoragePrefix(k, info.namespace), opts)
	}
	flusher, _ := w.(http.Flusher)
	enc := &eventWriter{w: w, flusher: flusher, answer: a, encoding: encodingOf(a), kind: k, now: s.now, shared: s.events}
	contentType := "application/json"
	if a.protobuf {
		enc.frames = newProtobufFrames(w)
		contentType = contentTypeProtobufWatch
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(http.StatusOK)
	if err != nil {
		enc.writeError(err, opts.FromRev, s.log.OldestWatchRev())
		return
	}
	defer watcher.Stop()
	defer unblockWhenDropped(w, watcher)()
	events := watcher.Events()
	for {
		var ev statelog.Event
		var ok bool
		select {
		case ev, ok = <-events:
		default:
			// Nothing more is waiting: what was written goes out now, so a burst of events
			// costs one flush, not one each.
			enc.flush()
			ev, ok = <-events
		}
		if !ok {
			break
		}
		if !enc.write(ev, sel, explicitInitial) {
			return
		}
	}
	if err := watcher.Err(); errors.Is(err, statelog.ErrExpired) {
		enc.writeError(err, opts.FromRev, s.log.OldestWatchRev())
	}
}

// watchSelector is a watch's selectors, validated, narrowed to the named object if any
// (/watch/.../pods/NAME).
func watchSelector(k *schemas.Kind, info requestInfo) (selector, error) {
	sel, err := parseSelectors(info)
	if err == nil {
		err = sel.validateFields(k.New())
	}
	if err == nil && info.name != "" {
		sel.field = fields.AndSelectors(sel.field, fields.OneTermEqualSelector("metadata.name", info.name))
	}
	return sel, err
}

func watchOptionsFor(info requestInfo) (statelog.WatchOptions, bool, error) {
	opts := statelog.WatchOptions{Bookmarks: info.query.Get("allowWatchBookmarks") == "true"}
	lo, err := listOptions(info, true)
	if err != nil {
		return opts, false, err
	}
	rv, _ := parseRV(lo.ResourceVersion)
	sendInitial := lo.SendInitialEvents != nil && *lo.SendInitialEvents
	switch {
	case sendInitial:
		opts.SendInitial = true // at the current revision, once it is at least rv (initialRev)
		opts.Bookmarks = true   // the initial-events-end bookmark is the WatchList contract
	case lo.SendInitialEvents == nil && rv == 0:
		// Kubernetes: an unset or "0" resourceVersion starts with synthetic ADDED events.
		opts.SendInitial = true
	default:
		// sendInitialEvents=false: changes after rv, or after now for rv "" or "0".
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
	w        http.ResponseWriter
	flusher  http.Flusher
	answer   answer
	encoding encoding        // of the shared events; not for a table
	frames   *protobufFrames // protobuf frames; nil for newline-delimited JSON
	kind     *schemas.Kind
	now      func() time.Time
	shared   *sharedEvents
}

// write translates one log event for this watcher's selector: an update that moves an object
// out of the selector is a DELETED for this watcher, one that moves it in is an ADDED. The
// decoded objects and their JSON are shared with every other watcher of the event.
func (e *eventWriter) write(ev statelog.Event, sel selector, explicitInitial bool) bool {
	switch ev.Type {
	case statelog.EventBookmark:
		if ev.InitialEnd && !explicitInitial {
			return true
		}
		return e.emitObject(watch.Bookmark, e.bookmark(ev))
	case statelog.EventDelete:
		obj, err := e.shared.object(e.kind, ev.Value, ev.Rev)
		if err != nil || !sel.matchesEvent(obj) {
			return true
		}
		return e.emit(watch.Deleted, obj)
	}
	obj, err := e.shared.object(e.kind, ev.Value, ev.Rev)
	if err != nil {
		return true
	}
	var prev *sharedEvent
	if ev.PrevRev != 0 && len(ev.PrevValue) > 0 && !sel.everything() {
		prev, _ = e.shared.object(e.kind, ev.PrevValue, ev.PrevRev)
	}
	now := sel.matchesEvent(obj)
	was := ev.PrevRev != 0 && (sel.everything() || sel.matchesEvent(prev))
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

// bookmark is an empty object of the watch's kind (or its metadata, for a metadata watch)
// carrying only the revision, and the initial-events-end annotation where it applies.
func (e *eventWriter) bookmark(ev statelog.Event) runtime.Object {
	obj := e.kind.New()
	setTypeMeta(obj, e.kind)
	m := mustMeta(obj)
	m.SetResourceVersion(formatRev(ev.Rev))
	if ev.InitialEnd {
		m.SetAnnotations(map[string]string{initialEventsEnd: "true"})
	}
	if e.answer.metadata() {
		p, _ := asMetadata(obj, e.answer.gv) // obj has metadata: no error
		return p
	}
	return obj
}

// emit sends a stored object's shared encoding in the watch's format; a table is per watcher
// (its ages are now's).
func (e *eventWriter) emit(t watch.EventType, obj *sharedEvent) bool {
	if e.answer.shape == shapeTable {
		return e.emitObject(t, schemas.Table(e.kind, []runtime.Object{obj.obj}, e.now()))
	}
	data, err := e.shared.encoded(obj, e.encoding)
	if err != nil {
		return true
	}
	return e.send(t, data)
}

// emitObject sends an object encoded for this watcher alone (a bookmark, a table, a Status).
func (e *eventWriter) emitObject(t watch.EventType, obj runtime.Object) bool {
	data, err := encodeIn(obj, e.frames != nil)
	if err != nil {
		return true
	}
	return e.send(t, data)
}

// send writes one event around object, an encoded object. In JSON it is the line
// {"type":t,"object":object}, the bytes json.Marshal gives for a metav1.WatchEvent-shaped
// struct (object is compact JSON already), written without copying object.
func (e *eventWriter) send(t watch.EventType, object []byte) bool {
	if e.frames != nil {
		return e.frames.send(t, object) == nil
	}
	for _, part := range [][]byte{linePrefix[t], object, lineEnd} {
		if _, err := e.w.Write(part); err != nil {
			return false
		}
	}
	return true
}

func (e *eventWriter) flush() {
	if e.flusher != nil {
		e.flusher.Flush()
	}
}

// writeError ends the stream with an ERROR event; an expired revision is 410 Gone, on which
// informers relist. oldest is the lowest revision a watch could have started from.
func (e *eventWriter) writeError(err error, from, oldest uint64) {
	var st *metav1.Status
	var apiStatus apierrors.APIStatus
	switch {
	case errors.As(err, &apiStatus):
		st = toStatus(err)
	case errors.Is(err, statelog.ErrExpired):
		st = toStatus(apierrors.NewResourceExpired("too old resource version: " + formatRev(from) + " (" + formatRev(oldest) + ")"))
	default:
		st = toStatus(apierrors.NewInternalError(err))
	}
	e.emitObject(watch.Error, st)
	e.flush()
}
