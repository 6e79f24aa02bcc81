package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/logvalue"
)

// maxConflictRetries bounds the read-modify-write loop of writes that carry no resourceVersion.
const maxConflictRetries = 16

// traceHeader stores the caller's W3C trace context with the write, so whoever reacts to the
// write can continue the trace.
func traceHeader(ctx context.Context) statelog.Header {
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	return statelog.HeaderFrom(carrier)
}

func (s *Server) get(ctx context.Context, k *schemas.Kind, ns, name string) (runtime.Object, error) {
	obj, _, err := s.getWithRev(ctx, k, ns, name)
	return obj, err
}

func (s *Server) getWithRev(ctx context.Context, k *schemas.Kind, ns, name string) (runtime.Object, uint64, error) {
	return s.readWithRev(ctx, k, ns, name, true)
}

// readWithRev reads an object from the log's view, which holds every write of this server;
// consistent also waits for every write the stream holds (other replicas').
func (s *Server) readWithRev(ctx context.Context, k *schemas.Kind, ns, name string, consistent bool) (runtime.Object, uint64, error) {
	return s.readAt(ctx, k, ns, name, statelog.ReadOptions{Consistent: consistent})
}

func (s *Server) decodeBody(k *schemas.Kind, body []byte, wo writeOptions) (runtime.Object, error) {
	if len(body) == 0 {
		return nil, badRequest("the request body is empty; a %s object is required", k.GVK.Kind)
	}
	if !wo.protobuf {
		if n := yamlDocuments(body); n > 1 {
			return nil, badRequest("the body holds %d YAML documents; a request takes exactly one %s", n, k.GVK.Kind)
		}
	}
	var obj runtime.Object
	var err error
	switch {
	case wo.protobuf:
		obj, err = schemas.DecodeProtobuf(k, body)
	case wo.warn && !wo.strict && wo.warnings != nil:
		var dropped []schemas.FieldError
		obj, dropped, err = schemas.DecodeObjectWarn(k, body)
		wo.warnings.droppedFields(dropped)
	default:
		obj, err = schemas.DecodeObject(k, body, wo.strict)
	}
	if err != nil {
		var se apierrors.APIStatus
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, badRequest("%v", err)
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind != "" && gvk != k.GVK {
		return nil, badRequest("the body is a %s (%s) but the request is for %s (%s)", gvk.Kind, gvk.GroupVersion(), k.GVK.Kind, k.GVK.GroupVersion())
	}
	setTypeMeta(obj, k)
	return obj, nil
}

// yamlDocuments counts the non-empty documents of a YAML stream (JSON is one document).
func yamlDocuments(body []byte) int {
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		return 1
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(body)))
	n := 0
	for {
		doc, err := r.Read()
		if err != nil {
			return n
		}
		if len(bytes.TrimSpace(doc)) > 0 && !bytes.Equal(bytes.TrimSpace(doc), []byte("---")) {
			n++
		}
	}
}

func invalid(k *schemas.Kind, name string, errs field.ErrorList) error {
	return apierrors.NewInvalid(k.GVK.GroupKind(), name, errs)
}

// create admits and writes a new object.
func (s *Server) create(ctx context.Context, k *schemas.Kind, ns string, body []byte, wo writeOptions) (runtime.Object, error) {
	if err := checkFieldManager("CreateOptions", wo); err != nil {
		return nil, err
	}
	obj, err := s.decodeBody(k, body, wo)
	if err != nil {
		return nil, err
	}
	return s.createObject(ctx, k, ns, obj, wo)
}

func (s *Server) createObject(ctx context.Context, k *schemas.Kind, ns string, obj runtime.Object, wo writeOptions) (runtime.Object, error) {
	m := mustMeta(obj)
	if k.Custom != nil && k.Custom.Terminating() {
		return nil, apierrors.NewForbidden(groupResource(k), m.GetName(), errors.New("create not allowed while custom resource definition is terminating"))
	}
	if k.Namespaced {
		if m.GetNamespace() == "" {
			m.SetNamespace(ns)
		}
		if ns != "" && m.GetNamespace() != ns {
			return nil, badRequest("the namespace of the provided object (%q) does not match the namespace sent on the request (%q)", m.GetNamespace(), ns)
		}
		if m.GetNamespace() == "" {
			m.SetNamespace(metav1.NamespaceDefault)
		}
	} else {
		m.SetNamespace("")
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(generateName(m.GetGenerateName()))
	}
	if m.GetName() == "" {
		return nil, invalid(k, "", field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name or generateName is required")})
	}
	if k.Namespaced {
		if err := s.checkNamespaceOpen(ctx, m.GetNamespace()); err != nil {
			return nil, err
		}
	}
	now := metav1.NewTime(s.now().UTC().Truncate(time.Second))
	m.SetUID(types.UID(uuid.NewUUID()))
	m.SetCreationTimestamp(now)
	m.SetResourceVersion("")
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	m.SetGeneration(1)
	if hasSubresource(k, "status") {
		var err error
		if obj, err = s.resetStatus(k, obj); err != nil {
			return nil, err
		}
	}
	return s.finishCreate(ctx, k, obj, wo)
}

func (s *Server) finishCreate(ctx context.Context, k *schemas.Kind, obj runtime.Object, wo writeOptions) (runtime.Object, error) {
	schemas.Default(obj)
	// Defaulted fields belong to the creator, as kube-apiserver decodes with defaults first.
	obj = trackCreate(k, obj, wo)
	m := mustMeta(obj)
	attrs := &Attributes{Verb: "create", Kind: k, Namespace: m.GetNamespace(), Name: m.GetName(), Object: obj}
	if err := s.mutate(ctx, attrs); err != nil {
		return nil, err
	}
	if errs := schemas.Validate(obj); len(errs) > 0 {
		return nil, invalid(k, m.GetName(), errs)
	}
	if err := s.validate(ctx, attrs); err != nil {
		return nil, err
	}
	release, err := s.allocateFor(ctx, k, obj, wo.dryRun)
	if err != nil {
		return nil, err
	}
	if wo.dryRun {
		return obj, nil
	}
	buf := borrowStorageBuffer()
	defer buf.release()
	data, err := buf.encode(obj)
	if err != nil {
		release()
		return nil, apierrors.NewInternalError(err)
	}
	rev, err := s.log.Create(ctx, schemas.StorageKey(k, m.GetNamespace(), m.GetName()), data, traceHeader(ctx))
	if err != nil {
		release()
		if errors.Is(err, statelog.ErrExists) {
			return nil, apierrors.NewAlreadyExists(groupResource(k), m.GetName())
		}
		return nil, writeFailed(err)
	}
	nameSpan(ctx, m.GetName())
	m.SetResourceVersion(formatRev(rev))
	return obj, nil
}

// resetStatus clears what a client may not set on create; pods start Pending. A typed
// object's status field is reset in place, not by a round trip of the whole object through
// its map shape.
func (s *Server) resetStatus(k *schemas.Kind, obj runtime.Object) (runtime.Object, error) {
	if f, ok := topField(obj, "status"); ok {
		f.SetZero()
		if p, ok := obj.(*corev1.Pod); ok {
			p.Status.Phase = corev1.PodPending
		}
		setTypeMeta(obj, k)
		return obj, nil
	}
	return statusResetByMap(k, obj)
}

// statusResetByMap is resetStatus through the object's map shape, for any kind.
func statusResetByMap(k *schemas.Kind, obj runtime.Object) (runtime.Object, error) {
	m, err := toMap(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	delete(m, "status")
	if k.GVK.Kind == "Pod" {
		m["status"] = map[string]any{"phase": "Pending"}
	}
	return fromMap(k, m)
}

// admit runs the whole admission chain for writes that have no schema validation of their own
// (delete, binding); create and update run mutate, then schema validation, then validate.
func (s *Server) admit(ctx context.Context, a *Attributes) error {
	if err := s.mutate(ctx, a); err != nil {
		return err
	}
	return s.validate(ctx, a)
}

// mutate runs the mutating admission steps (after defaulting).
func (s *Server) mutate(ctx context.Context, a *Attributes) error {
	for _, f := range s.opts.Mutating {
		if err := f(ctx, a); err != nil {
			return asForbidden(a, err)
		}
	}
	if isCRDKind(a.Kind) {
		return s.admitCRD(ctx, a)
	}
	return s.admitDefaultStorageClass(ctx, a)
}

// validate runs the validating admission steps (after schema validation), then the built-in
// NodeRestriction and RBAC escalation prevention.
func (s *Server) validate(ctx context.Context, a *Attributes) error {
	for _, f := range s.opts.Validating {
		if err := f(ctx, a); err != nil {
			return asForbidden(a, err)
		}
	}
	// Built in: a node identity exists only where a transport authenticated one.
	if err := NodeRestriction(ctx, a); err != nil {
		return asForbidden(a, err)
	}
	if err := s.preventEscalation(ctx, a); err != nil {
		return asForbidden(a, err)
	}
	return nil
}

func asForbidden(a *Attributes, err error) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return err
	}
	return apierrors.NewForbidden(groupResource(a.Kind), a.Name, err)
}

// checkNamespaceOpen refuses writes into a namespace that is missing or being deleted. Like
// kube-apiserver's NamespaceLifecycle admission it reads the namespace from the cache (here
// the log's view, which holds every write of this server), and asks for the latest state
// only when the view has no such namespace, which may have just been created elsewhere: a
// consistent read per create would cost a round trip to the stream and a wait for the view
// to apply every write in flight.
func (s *Server) checkNamespaceOpen(ctx context.Context, ns string) error {
	nsKind, _ := schemas.ByResource("", "v1", "namespaces")
	key := schemas.StorageKey(nsKind, "", ns)
	e, err := s.log.Get(ctx, key, statelog.ReadOptions{})
	if errors.Is(err, statelog.ErrNotFound) {
		e, err = s.log.Get(ctx, key, statelog.ReadOptions{Consistent: true})
	}
	if errors.Is(err, statelog.ErrNotFound) {
		return apierrors.NewNotFound(groupResource(nsKind), ns)
	}
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	// Only the deletion mark matters here: no need to decode the whole Namespace per create.
	stored, err := logvalue.Meta(e.Value)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("stored namespace %s is corrupt: %w", ns, err))
	}
	if stored.DeletionTimestamp != nil {
		return apierrors.NewForbidden(groupResource(nsKind), ns, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
	}
	return nil
}

// generateName appends five random characters from Kubernetes' unambiguous alphabet.
func generateName(base string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	if len(base) > 58 {
		base = base[:58]
	}
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return base + string(b)
}

// mutation computes the next version of an object from the stored one, which it must not
// modify: it is compared with the result, and it is the decode every watcher of its revision
// shares (readEntry). One that edits it works on a copy (edited).
type mutation func(cur runtime.Object) (runtime.Object, error)

// edited is a mutation that edits a copy of the stored object in place: the update's one copy.
func edited(edit mutation) mutation {
	return func(cur runtime.Object) (runtime.Object, error) { return edit(cur.DeepCopyObject()) }
}

// guaranteedUpdate runs a read-modify-write cycle with compare-and-swap on the revision. With a
// client precondition (expectedRV) a lost race is a 409; without one it re-reads and retries.
func (s *Server) guaranteedUpdate(ctx context.Context, k *schemas.Kind, ns, name, sub, verb string, wo writeOptions, mutate mutation) (runtime.Object, error) {
	key := schemas.StorageKey(k, ns, name)
	return onLatest(k, name, func(fresh bool) (runtime.Object, casOutcome, error) {
		cur, stored, err := s.readEntry(ctx, k, ns, name, statelog.ReadOptions{Consistent: fresh})
		if err != nil {
			return nil, casDecided, err
		}
		curRev := stored.Rev
		next, err := mutate(cur)
		if err != nil {
			return nil, casDecided, err
		}
		rv := mustMeta(next).GetResourceVersion()
		pinned := rv != ""
		if pinned && rv != formatRev(curRev) {
			return nil, casDecided, conflict(k, name)
		}
		next, err = s.prepareUpdate(ctx, k, verb, sub, cur, next, wo)
		if err != nil {
			return nil, casDecided, err
		}
		nm := mustMeta(next)
		wctx := ctx
		if mustMeta(cur).GetDeletionTimestamp() != nil {
			wctx = statelog.Freeing(ctx) // on its way out: must fit on a disk too full for growing writes
		}
		// The last finalizer gone from an object being deleted: the delete completes now.
		if nm.GetDeletionTimestamp() != nil && len(nm.GetFinalizers()) == 0 {
			obj, err := s.deleteNow(ctx, k, cur.DeepCopyObject(), curRev, wo) // it answers with its revision
			if err != nil || wo.dryRun {
				return obj, casDecided, err
			}
			return obj, casWritten, nil
		}
		buf := borrowStorageBuffer()
		defer buf.release()
		data, err := buf.encode(next)
		if err != nil {
			return nil, casDecided, apierrors.NewInternalError(err)
		}
		// Unchanged is the stored bytes unchanged (what kube-apiserver compares); a stale
		// stored form (a Secret from before encryption) is written even unchanged.
		if bytes.Equal(data, stored.Value) && !s.log.Stale(key) {
			return cur, casDecided, nil
		}
		undo, done, err := s.reallocateFor(ctx, k, cur, next, wo.dryRun)
		if err != nil {
			return nil, casDecided, err
		}
		if wo.dryRun {
			return next, casDecided, nil
		}
		if _, isService := next.(*corev1.Service); isService {
			// reallocateFor fills in the node ports it allocated: what is written must carry them.
			if data, err = buf.encode(next); err != nil {
				undo()
				return nil, casDecided, apierrors.NewInternalError(err)
			}
		}
		rev, err := s.log.Update(wctx, key, data, curRev, traceHeader(ctx))
		if err != nil {
			undo()
		} else {
			done()
		}
		if errors.Is(err, statelog.ErrConflict) || errors.Is(err, statelog.ErrNotFound) {
			if pinned {
				return nil, casDecided, conflict(k, name)
			}
			return nil, casLostRace, nil
		}
		if err != nil {
			return nil, casDecided, writeFailed(err)
		}
		nm.SetResourceVersion(formatRev(rev))
		return next, casWritten, nil
	})
}

// casOutcome is how one read-decide-write attempt on an object ended.
type casOutcome int

const (
	casWritten  casOutcome = iota // the compare-and-swap took: the copy read was the latest
	casDecided                    // refused, conflicting or nothing to write: the answer
	casLostRace                   // an unconditional write lost its race: read again and retry
)

// onLatest runs attempt on the log view's copy of the object first (it holds every write of
// this server, and costs no round trip), as kube-apiserver's GuaranteedUpdate starts from its
// watch cache. A write proves that copy was the latest; any other answer (a 409, a refusal, a
// no-op) is given only once decided on a consistent read, so none rests on a copy that another
// replica's write has made stale.
func onLatest(k *schemas.Kind, name string, attempt func(fresh bool) (runtime.Object, casOutcome, error)) (runtime.Object, error) {
	fresh := false
	for n := 0; ; n++ {
		obj, outcome, err := attempt(fresh)
		switch {
		case outcome == casWritten:
			return obj, err
		case !fresh:
			fresh = true
		case outcome == casLostRace && n < maxConflictRetries:
		case outcome == casLostRace:
			return nil, conflict(k, name)
		default:
			return obj, err
		}
	}
}

func conflict(k *schemas.Kind, name string) error {
	return apierrors.NewConflict(groupResource(k), name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}

// changed compares the stored forms (revision excluded), so a no-op write writes nothing.
func changed(cur, next runtime.Object) bool {
	bufA, bufB := borrowStorageBuffer(), borrowStorageBuffer()
	defer bufA.release()
	defer bufB.release()
	a, err := bufA.encode(cur)
	if err != nil {
		return true
	}
	b, err := bufB.encode(next)
	return err != nil || !bytes.Equal(a, b)
}

// prepareUpdate carries over what the client may not change, applies subresource rules,
// defaulting, admission and validation.
func (s *Server) prepareUpdate(ctx context.Context, k *schemas.Kind, verb, sub string, cur, next runtime.Object, wo writeOptions) (runtime.Object, error) {
	var err error
	defaulted := false
	cm, nm := mustMeta(cur), mustMeta(next)
	if nm.GetName() != "" && nm.GetName() != cm.GetName() {
		return nil, badRequest("the name of the object (%s) does not match the name on the URL (%s)", nm.GetName(), cm.GetName())
	}
	if k.Namespaced && nm.GetNamespace() != "" && nm.GetNamespace() != cm.GetNamespace() {
		return nil, badRequest("the namespace of the object (%s) does not match the namespace on the URL (%s)", nm.GetNamespace(), cm.GetNamespace())
	}
	switch {
	case sub == "status":
		// Only status changes through /status; everything else stays as stored, but for the
		// managed fields an apply computed.
		applied := nm.GetManagedFields()
		if next, defaulted, err = statusOnto(k, cur, next); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if wo.applied {
			mustMeta(next).SetManagedFields(applied)
		}
	case hasSubresource(k, "status"):
		if next, err = withSection(k, next, cur, "status"); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	nm = mustMeta(next)
	nm.SetName(cm.GetName())
	nm.SetNamespace(cm.GetNamespace())
	nm.SetUID(cm.GetUID())
	nm.SetCreationTimestamp(cm.GetCreationTimestamp())
	nm.SetDeletionTimestamp(cm.GetDeletionTimestamp())
	nm.SetDeletionGracePeriodSeconds(cm.GetDeletionGracePeriodSeconds())
	// Validation sees the revision being replaced; the stored form never carries it.
	nm.SetResourceVersion(cm.GetResourceVersion())
	if cm.GetDeletionTimestamp() != nil && addsFinalizer(cm.GetFinalizers(), nm.GetFinalizers()) {
		return nil, invalid(k, cm.GetName(), field.ErrorList{field.Forbidden(field.NewPath("metadata", "finalizers"), "no new finalizers can be added if the object is being deleted")})
	}
	if !defaulted {
		schemas.DefaultUpdate(next, cur)
	}
	nm.SetGeneration(cm.GetGeneration())
	if sub == "" && specChanged(cur, next) {
		nm.SetGeneration(cm.GetGeneration() + 1)
	}
	next = trackUpdate(k, sub, cur, next, wo)
	attrs := &Attributes{Verb: verb, Kind: k, Namespace: cm.GetNamespace(), Name: cm.GetName(), Subresource: sub, Object: next, OldObject: cur}
	if err := s.mutate(ctx, attrs); err != nil {
		return nil, err
	}
	validateUpdate := schemas.ValidateUpdate
	if sub == "status" {
		validateUpdate = schemas.ValidateStatusUpdate
	}
	if errs := validateUpdate(next, cur); len(errs) > 0 {
		return nil, invalid(k, cm.GetName(), errs)
	}
	if err := s.validate(ctx, attrs); err != nil {
		return nil, err
	}
	return next, nil
}

func addsFinalizer(old, next []string) bool {
	have := map[string]bool{}
	for _, f := range old {
		have[f] = true
	}
	for _, f := range next {
		if !have[f] {
			return true
		}
	}
	return false
}

// update replaces an object (PUT), or its status with sub == "status".
func (s *Server) update(ctx context.Context, k *schemas.Kind, ns, name, sub string, body []byte, wo writeOptions) (runtime.Object, error) {
	if err := checkFieldManager("UpdateOptions", wo); err != nil {
		return nil, err
	}
	obj, err := s.decodeBody(k, body, wo)
	if err != nil {
		return nil, err
	}
	// The first attempt takes the decoded body itself; one after a lost race decodes it again
	// (the first was changed on its way to the log), without repeating its warnings.
	again := wo
	again.warnings = nil
	attempts := 0
	return s.guaranteedUpdate(ctx, k, ns, name, sub, "update", wo, func(runtime.Object) (runtime.Object, error) {
		if attempts++; attempts == 1 {
			return obj, nil
		}
		return s.decodeBody(k, body, again)
	})
}

func parseRV(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, badRequest("resourceVersion %q is not a valid revision", s)
	}
	return v, nil
}
