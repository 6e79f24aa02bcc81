package informer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/apiwire"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// APISource lists and watches one kind through the apiserver with a field selector, so that
// an informer over it (NewFrom) caches only what the selector picks: a node agent's own pods
// (spec.nodeName=<node>), which the apiserver answers from its pods-by-node index. The watch
// is the NATS long poll (apiclient.WatchPoll); each event keeps the trace context of its write.
type APISource struct {
	Client        *apiclient.Client // over NATS
	Kind          *schemas.Kind
	Namespace     string // "" = all
	FieldSelector string
	PollSeconds   int // per poll; default 20
}

// Watch starts a list (SendInitial) or resumes from o.FromRev; a revision the apiserver no
// longer has is statelog.ErrExpired, on which the informer relists.
func (a *APISource) Watch(ctx context.Context, _ string, o statelog.WatchOptions) (Stream, error) {
	ctx, cancel := context.WithCancel(ctx)
	st := &apiStream{a: a, out: make(chan statelog.Event), cancel: cancel}
	var first *apiwire.WatchBatch
	if !o.SendInitial && o.FromRev > 0 {
		// The first poll answers here, so an expired revision is Watch's error.
		b, err := a.poll(ctx, o.FromRev)
		if err != nil {
			cancel()
			return nil, err
		}
		first = b
	}
	go st.run(ctx, o, first)
	return st, nil
}

func (a *APISource) query(rev uint64) url.Values {
	q := url.Values{}
	if a.FieldSelector != "" {
		q.Set("fieldSelector", a.FieldSelector)
	}
	if rev > 0 { // a list without one is a consistent read
		q.Set("resourceVersion", strconv.FormatUint(rev, 10))
	}
	return q
}

func (a *APISource) poll(ctx context.Context, rev uint64) (*apiwire.WatchBatch, error) {
	q := a.query(rev)
	q.Set("allowWatchBookmarks", "true")
	secs := a.PollSeconds
	if secs <= 0 {
		secs = 20
	}
	q.Set("timeoutSeconds", strconv.Itoa(secs))
	b, err := a.Client.WatchPoll(ctx, a.Kind, a.Namespace, q)
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return nil, fmt.Errorf("%w: %v", statelog.ErrExpired, err)
	}
	return b, err
}

type apiStream struct {
	a      *APISource
	out    chan statelog.Event
	cancel context.CancelFunc

	mu  sync.Mutex
	err error
}

func (s *apiStream) Events() <-chan statelog.Event { return s.out }
func (s *apiStream) Stop()                         { s.cancel() }

func (s *apiStream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *apiStream) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

func (s *apiStream) send(ctx context.Context, ev statelog.Event) bool {
	select {
	case s.out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *apiStream) run(ctx context.Context, o statelog.WatchOptions, batch *apiwire.WatchBatch) {
	defer close(s.out)
	rev := o.FromRev
	if batch == nil {
		var err error
		if rev, err = s.list(ctx); err != nil {
			s.fail(err)
			return
		}
	}
	for ctx.Err() == nil {
		if batch == nil {
			var err error
			if batch, err = s.a.poll(ctx, rev); err != nil {
				s.fail(err)
				return
			}
		}
		for _, we := range batch.Events {
			ev, err := s.event(we)
			if err != nil {
				s.fail(err)
				return
			}
			if !s.send(ctx, ev) {
				return
			}
			rev = max(rev, ev.Rev)
		}
		batch = nil
	}
}

// list sends the selected objects as a snapshot closed by its InitialEnd bookmark.
func (s *apiStream) list(ctx context.Context) (uint64, error) {
	objs, rv, err := s.a.Client.List(ctx, s.a.Kind, s.a.Namespace, s.a.query(0))
	if err != nil {
		return 0, err
	}
	rev, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("informer: list %s: resourceVersion %q: %w", s.a.Kind.Resource, rv, err)
	}
	for _, obj := range objs {
		data, err := json.Marshal(obj)
		if err != nil {
			return 0, err
		}
		m, err := storedMeta(data)
		if err != nil {
			return 0, err
		}
		if !s.send(ctx, statelog.Event{Type: statelog.EventPut, Key: schemas.StorageKey(s.a.Kind, m.Namespace, m.Name), Rev: m.rev, Value: data}) {
			return 0, ctx.Err()
		}
	}
	if !s.send(ctx, statelog.Event{Type: statelog.EventBookmark, Rev: rev, InitialEnd: true}) {
		return 0, ctx.Err()
	}
	return rev, nil
}

// event turns one API watch event into the log event the informer applies.
func (s *apiStream) event(we apiwire.WatchEvent) (statelog.Event, error) {
	if we.Type == "ERROR" {
		var st metav1.Status
		_ = json.Unmarshal(we.Object, &st)
		err := error(&apierrors.StatusError{ErrStatus: st})
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			err = fmt.Errorf("%w: %v", statelog.ErrExpired, err)
		}
		return statelog.Event{}, err
	}
	m, err := storedMeta(we.Object)
	if err != nil {
		return statelog.Event{}, err
	}
	ev := statelog.Event{Key: schemas.StorageKey(s.a.Kind, m.Namespace, m.Name), Rev: m.rev, Value: we.Object, Header: statelog.HeaderFrom(we.Trace)}
	switch we.Type {
	case "ADDED", "MODIFIED":
		ev.Type = statelog.EventPut
	case "DELETED":
		ev.Type = statelog.EventDelete
	case "BOOKMARK":
		ev = statelog.Event{Type: statelog.EventBookmark, Rev: m.rev}
	default:
		return statelog.Event{}, fmt.Errorf("informer: watch event of unknown type %q", we.Type)
	}
	return ev, nil
}

type objectMeta struct {
	Name, Namespace string
	rev             uint64
}

func storedMeta(data []byte) (objectMeta, error) {
	var o struct {
		Metadata struct {
			Name            string `json:"name"`
			Namespace       string `json:"namespace"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &o); err != nil {
		return objectMeta{}, fmt.Errorf("informer: watch object: %w", err)
	}
	rev, err := strconv.ParseUint(o.Metadata.ResourceVersion, 10, 64)
	if err != nil {
		return objectMeta{}, fmt.Errorf("informer: object %s/%s: resourceVersion %q: %w", o.Metadata.Namespace, o.Metadata.Name, o.Metadata.ResourceVersion, err)
	}
	return objectMeta{Name: o.Metadata.Name, Namespace: o.Metadata.Namespace, rev: rev}, nil
}
