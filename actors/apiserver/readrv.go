package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// freshWait is how long a read at a revision the view has not reached yet waits for it:
// kube-apiserver's watch cache blockTimeout. After it the answer is 504 "Too large resource
// version" with Retry-After, as there.
const (
	freshWait            = 3 * time.Second
	tooLargeRetrySeconds = 1
)

// listAt is how fresh a list must be: resourceVersion "" is a consistent read, "0" any recent
// state, N (NotOlderThan, or no match) at least N, N with Exact the state at N.
type listAt struct {
	opts  statelog.ReadOptions
	exact uint64
}

// listOptions validates a list's or watch's resourceVersion, resourceVersionMatch,
// sendInitialEvents and continue as kube-apiserver does, with its messages.
func listOptions(info requestInfo, watch bool) (*internalversion.ListOptions, error) {
	q := info.query
	o := &internalversion.ListOptions{
		ResourceVersion:      q.Get("resourceVersion"),
		ResourceVersionMatch: metav1.ResourceVersionMatch(q.Get("resourceVersionMatch")),
		Continue:             q.Get("continue"),
		Watch:                watch,
	}
	if v := q.Get("sendInitialEvents"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, badRequest("sendInitialEvents %q is not a boolean", v)
		}
		o.SendInitialEvents = &b
	}
	if errs := validation.ValidateListOptions(o, true); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	if o.ResourceVersion != "" {
		if _, err := parseRV(o.ResourceVersion); err != nil {
			return nil, err
		}
	}
	return o, nil
}

func listReadAt(info requestInfo) (listAt, error) {
	o, err := listOptions(info, false)
	if err != nil {
		return listAt{}, err
	}
	switch o.ResourceVersion {
	case "":
		return listAt{opts: statelog.ReadOptions{Consistent: true}}, nil
	case "0":
		return listAt{}, nil
	}
	n, _ := parseRV(o.ResourceVersion)
	if o.ResourceVersionMatch == metav1.ResourceVersionMatchExact {
		return listAt{exact: n}, nil
	}
	return listAt{opts: statelog.ReadOptions{MinRev: n}}, nil
}

// getReadOptions follows a get's resourceVersion: "" consistent, "0" any, N at least N.
func getReadOptions(info requestInfo) (statelog.ReadOptions, error) {
	switch rv := info.query.Get("resourceVersion"); rv {
	case "":
		return statelog.ReadOptions{Consistent: true}, nil
	case "0":
		return statelog.ReadOptions{}, nil
	default:
		n, err := parseRV(rv)
		return statelog.ReadOptions{MinRev: n}, err
	}
}

// getObject answers GET of one object at the request's resourceVersion.
func (s *Server) getObject(ctx context.Context, k *schemas.Kind, info requestInfo) (runtime.Object, error) {
	ro, err := getReadOptions(info)
	if err != nil {
		return nil, err
	}
	obj, _, err := s.readAt(ctx, k, info.namespace, info.name, ro)
	return obj, err
}

// readAt reads one object from the log's view as fresh as ro asks: the caller's own copy.
func (s *Server) readAt(ctx context.Context, k *schemas.Kind, ns, name string, ro statelog.ReadOptions) (runtime.Object, uint64, error) {
	obj, e, err := s.readEntry(ctx, k, ns, name, ro)
	if err != nil {
		return nil, 0, err
	}
	return obj.DeepCopyObject(), e.Rev, nil
}

// readEntry is readAt with the log's entry: its value is the object's stored form (plaintext),
// what a write compares its own to, as kube-apiserver compares with the bytes etcd holds. The
// object is the decode shared with the watchers (most likely just written and decoded for
// them, or about to be), which nobody may modify: an update copies it once, for its edit.
func (s *Server) readEntry(ctx context.Context, k *schemas.Kind, ns, name string, ro statelog.ReadOptions) (runtime.Object, statelog.Entry, error) {
	fctx, cancel := freshContext(ctx, ro.MinRev)
	defer cancel()
	e, err := s.log.Get(fctx, schemas.StorageKey(k, ns, name), ro)
	if errors.Is(err, statelog.ErrNotFound) {
		return nil, statelog.Entry{}, apierrors.NewNotFound(groupResource(k), name)
	}
	if err != nil {
		return nil, statelog.Entry{}, s.readError(ctx, err, ro.MinRev)
	}
	se, err := s.events.object(k, e.Value, e.Rev)
	if err != nil {
		return nil, statelog.Entry{}, err
	}
	if s.shared != nil {
		s.shared.saw(e.Key, e.Rev, se.obj)
	}
	return se.obj, e, nil
}

// listEntries reads the entries under prefix as fresh as at asks.
func (s *Server) listEntries(ctx context.Context, prefix string, at listAt) ([]statelog.Entry, uint64, error) {
	fctx, cancel := freshContext(ctx, max(at.opts.MinRev, at.exact))
	defer cancel()
	if at.exact > 0 {
		entries, err := s.log.ListAt(fctx, prefix, at.exact)
		if errors.Is(err, statelog.ErrExpired) {
			return nil, 0, apierrors.NewResourceExpired("The resourceVersion for the provided list is too old.")
		}
		if err != nil {
			return nil, 0, s.readError(ctx, err, at.exact)
		}
		return entries, at.exact, nil
	}
	entries, rev, err := s.log.List(fctx, prefix, at.opts)
	if err != nil {
		return nil, 0, s.readError(ctx, err, at.opts.MinRev)
	}
	return entries, rev, nil
}

// initialRev is the revision a watch's initial snapshot must at least reflect:
// sendInitialEvents=true with resourceVersion N (NotOlderThan). 0 when it waits for nothing.
func initialRev(info requestInfo, sendInitial bool) uint64 {
	if !sendInitial {
		return 0
	}
	rv, _ := parseRV(info.query.Get("resourceVersion"))
	return rv
}

// freshContext bounds a wait for revision rev to freshWait; rev 0 waits for nothing.
func freshContext(ctx context.Context, rev uint64) (context.Context, context.CancelFunc) {
	if rev == 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, freshWait)
}

// waitFresh waits up to freshWait for the view to reach rev.
func (s *Server) waitFresh(ctx context.Context, rev uint64) error {
	fctx, cancel := freshContext(ctx, rev)
	defer cancel()
	if err := s.log.WaitForRev(fctx, rev); err != nil {
		return s.readError(ctx, err, rev)
	}
	return nil
}

// readError is the API error of a failed read: a wait for rev that ran out of freshWait (while
// the request itself goes on) is "Too large resource version".
func (s *Server) readError(ctx context.Context, err error, rev uint64) error {
	if rev > 0 && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return tooLargeResourceVersion(rev, s.log.Applied())
	}
	return apierrors.NewInternalError(err)
}

// tooLargeResourceVersion is kube-apiserver's storage.NewTooLargeResourceVersionError: a 504
// with the ResourceVersionTooLarge cause and a retry hint.
func tooLargeResourceVersion(rev, current uint64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rev, current), tooLargeRetrySeconds)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type:    metav1.CauseTypeResourceVersionTooLarge,
		Message: "Too large resource version",
	}}
	return err
}
