package apiserver

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/logvalue"
)

// podIndex files every pod's stored value under its spec.nodeName, so that a list with
// fieldSelector=spec.nodeName=N (each node agent's) costs that node's pods, not a scan and
// decode of every pod. It follows the whole log, not just pods: its revision is then the
// view's, so a consistent list waits only for the events already applied, never for a
// bookmark. It is built on the first such list (wanted), so a control plane whose node
// agents read their pods another way (skiff up's own kubelet, simulated nodes) does not
// decode every pod write a second time for it; lists go the usual way until it has synced.
type podIndex struct {
	wanted   chan struct{} // closed by the first list by node
	wantOnce sync.Once

	mu     sync.RWMutex
	rev    uint64
	synced bool
	nodeOf map[string]string                    // pod storage key -> node
	byNode map[string]map[string]statelog.Entry // node -> pod storage key -> stored value
	moved  chan struct{}                        // closed and replaced whenever rev moves
}

func newPodIndex() *podIndex {
	return &podIndex{wanted: make(chan struct{}), nodeOf: map[string]string{}, byNode: map[string]map[string]statelog.Entry{}, moved: make(chan struct{})}
}

// want starts the index's build (once); until it has synced, list says so.
func (x *podIndex) want() { x.wantOnce.Do(func() { close(x.wanted) }) }

// run waits until the index is wanted, then follows the log until ctx ends, resuming from its revision after a dropped watch and
// rebuilding from a snapshot when that revision is gone.
func (x *podIndex) run(ctx context.Context, log *statelog.Log) {
	select {
	case <-x.wanted:
	case <-ctx.Done():
		return
	}
	pods, _ := schemas.ByResource("", "v1", "pods")
	prefix := schemas.StoragePrefix(pods, "")
	for ctx.Err() == nil {
		x.mu.RLock()
		opts := statelog.WatchOptions{FromRev: x.rev, Bookmarks: true}
		x.mu.RUnlock()
		if opts.FromRev == 0 {
			opts = statelog.WatchOptions{SendInitial: true, Bookmarks: true}
		}
		w, err := log.Watch(ctx, "", opts)
		if err == nil {
			for ev := range w.Events() {
				x.apply(ev, prefix, opts.SendInitial)
			}
			err = w.Err()
			w.Stop()
		}
		if errors.Is(err, statelog.ErrExpired) {
			x.reset()
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (x *podIndex) reset() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.rev, x.synced = 0, false
	x.nodeOf, x.byNode = map[string]string{}, map[string]map[string]statelog.Entry{}
}

// put indexes a written pod by its node, the only field the index needs of it.
func (x *podIndex) put(ev statelog.Event) {
	n, err := logvalue.PodNodeName(ev.Value)
	if err != nil {
		return
	}
	x.nodeOf[ev.Key] = n
	if x.byNode[n] == nil {
		x.byNode[n] = map[string]statelog.Entry{}
	}
	x.byNode[n][ev.Key] = statelog.Entry{Key: ev.Key, Value: ev.Value, Rev: ev.Rev}
}

func (x *podIndex) apply(ev statelog.Event, prefix string, snapshot bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if strings.HasPrefix(ev.Key, prefix) && ev.Type != statelog.EventBookmark {
		if old, ok := x.nodeOf[ev.Key]; ok {
			delete(x.byNode[old], ev.Key)
			if len(x.byNode[old]) == 0 {
				delete(x.byNode, old)
			}
			delete(x.nodeOf, ev.Key)
		}
		if ev.Type == statelog.EventPut {
			x.put(ev)
		}
	}
	// A snapshot's events carry their keys' revisions, not the snapshot's: only its closing
	// bookmark says where it stands.
	if !snapshot || x.synced || ev.InitialEnd {
		x.rev = max(x.rev, ev.Rev)
		x.synced = x.synced || ev.InitialEnd || !snapshot
		close(x.moved)
		x.moved = make(chan struct{})
	}
}

// list returns the pods on node as of a revision at least min (waiting for the index to
// reach it), or ok=false while the index has not caught up with the log once.
func (x *podIndex) list(ctx context.Context, node string, min uint64) (entries []statelog.Entry, rev uint64, ok bool, err error) {
	for {
		x.mu.RLock()
		synced, cur, moved := x.synced, x.rev, x.moved
		if synced && cur >= min {
			for _, e := range x.byNode[node] {
				entries = append(entries, e)
			}
			x.mu.RUnlock()
			sort.Slice(entries, func(i, j int) bool { return entries[i].Key < entries[j].Key })
			return entries, cur, true, nil
		}
		x.mu.RUnlock()
		if !synced {
			return nil, 0, false, nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return nil, 0, true, ctx.Err()
		}
	}
}

// nodeOfSelector returns N when the field selector asks for spec.nodeName=N (alone or with
// other terms, which the caller still applies).
func nodeOfSelector(sel selector) (string, bool) {
	for _, r := range sel.field.Requirements() {
		if r.Field == "spec.nodeName" && (r.Operator == selection.Equals || r.Operator == selection.DoubleEquals) {
			return r.Value, true
		}
	}
	return "", false
}

// listByNode answers a pod list with a spec.nodeName selector from the index; ok=false means
// the caller lists the usual way.
func (s *Server) listByNode(ctx context.Context, k *schemas.Kind, info requestInfo, sel selector, at listAt) ([]runtime.Object, uint64, bool, error) {
	node, ok := nodeOfSelector(sel)
	if !ok || s.pods == nil || k.Resource != "pods" || k.GVK.Group != "" || at.exact > 0 {
		return nil, 0, false, nil
	}
	s.pods.want()
	fctx, cancel := freshContext(ctx, at.opts.MinRev)
	defer cancel()
	// The revision the list must reflect: the stream's last for a consistent read.
	min, err := s.log.Barrier(fctx, at.opts)
	if err != nil {
		return nil, 0, true, s.readError(ctx, err, at.opts.MinRev)
	}
	entries, rev, ok, err := s.pods.list(fctx, node, min)
	if err != nil {
		return nil, 0, true, s.readError(ctx, err, at.opts.MinRev)
	}
	if !ok {
		return nil, 0, false, nil
	}
	objs := make([]runtime.Object, 0, len(entries))
	for _, e := range entries {
		if info.namespace != "" && !strings.HasPrefix(e.Key, schemas.StoragePrefix(k, info.namespace)) {
			continue
		}
		obj, err := decodeStored(k, e.Value, e.Rev)
		if err != nil {
			return nil, 0, true, apierrors.NewInternalError(err)
		}
		if sel.matches(obj) {
			objs = append(objs, obj)
		}
	}
	return objs, rev, true, nil
}

func (x *podIndex) isSynced() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.synced
}
