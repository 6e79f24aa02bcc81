package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/schemas"
)

// Bounds on the work of one patch, as kube-apiserver sets them.
const (
	// maxJSONPatchOperations is kube-apiserver's limit on the operations of one JSON patch.
	maxJSONPatchOperations = 10000
	// patchTimeout bounds applying a patch (kube-apiserver's PATCH handler: 34 s at most).
	patchTimeout = 34 * time.Second
	// jsonPatchChunk is how many JSON patch operations run between checks of the deadline,
	// the client's presence and the document's size.
	jsonPatchChunk = 1000
)

// limitJSONPatchCopies caps the bytes the `copy` operations of one JSON patch may add. The
// library's limit is process-wide, so, as kube-apiserver does, the smallest limit set wins.
func limitJSONPatchCopies(limit int64) {
	for {
		cur := atomic.LoadInt64(&jsonpatch.AccumulatedCopySizeLimit)
		if cur > 0 && cur <= limit {
			return
		}
		if atomic.CompareAndSwapInt64(&jsonpatch.AccumulatedCopySizeLimit, cur, limit) {
			return
		}
	}
}

// patch applies a JSON, merge, strategic-merge or apply patch to the stored object and writes
// the result through the same update path as PUT; created tells an apply that created it.
func (s *Server) patch(ctx context.Context, k *schemas.Kind, ns, name, sub, contentType string, body []byte, wo writeOptions) (obj runtime.Object, created bool, err error) {
	pt := types.PatchType(strings.TrimSpace(strings.Split(contentType, ";")[0]))
	switch pt {
	case types.StrategicMergePatchType:
		if k.Custom != nil { // no Go type to take merge keys from, as in kube-apiserver
			return nil, false, unsupportedMediaType(contentType, patchTypes...)
		}
	case types.JSONPatchType, types.MergePatchType, types.ApplyYAMLPatchType:
	default:
		return nil, false, unsupportedMediaType(contentType, patchTypes...)
	}
	if len(body) == 0 {
		return nil, false, badRequest("the patch body is empty")
	}
	if err := checkPatchOptions(pt, wo); err != nil {
		return nil, false, err
	}
	if pt == types.ApplyYAMLPatchType {
		return s.apply(ctx, k, ns, name, sub, body, wo)
	}
	if sub == "scale" {
		obj, err = s.patchScale(ctx, k, ns, name, pt, body, wo)
		return obj, false, err
	}
	// A patch that failed on a revision fails the same way on it again: the retry on a
	// consistent read (onLatest) does not repeat the work when the revision has not moved.
	var failedRV string
	var failed error
	obj, err = s.guaranteedUpdate(ctx, k, ns, name, sub, "patch", wo, func(cur runtime.Object) (runtime.Object, error) {
		rv := mustMeta(cur).GetResourceVersion()
		if failed != nil && rv == failedRV {
			return nil, failed
		}
		// The stored revision is left out, so only a resourceVersion the patch itself sets
		// pins the write (and turns a lost race into 409 instead of a retry).
		curJSON, err := json.Marshal(withoutRV(cur))
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		out, err := s.applyPatch(ctx, pt, curJSON, body, k.New())
		if err != nil {
			failedRV, failed = rv, err
			return nil, err
		}
		return s.decodeBody(k, out, wo)
	})
	return obj, false, err
}

// patchScale patches the Scale view of an object (kubectl scale sends a merge patch).
func (s *Server) patchScale(ctx context.Context, k *schemas.Kind, ns, name string, pt types.PatchType, body []byte, wo writeOptions) (runtime.Object, error) {
	sc, err := s.getScale(ctx, k, ns, name)
	if err != nil {
		return nil, err
	}
	mustMeta(sc).SetResourceVersion("")
	curJSON, err := json.Marshal(sc)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out, err := s.applyPatch(ctx, pt, curJSON, body, &autoscalingv1.Scale{})
	if err != nil {
		return nil, err
	}
	return s.updateScale(ctx, k, ns, name, out, wo)
}

// applyPatch applies a patch of type pt; dataStruct tells strategic merge the Go type. The work
// is bounded: at most maxJSONPatchOperations operations, copies and the result no larger than
// a request body, patchTimeout, and it stops once the client has gone (ctx).
func (s *Server) applyPatch(ctx context.Context, pt types.PatchType, cur, patch []byte, dataStruct runtime.Object) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, patchTimeout)
	defer cancel()
	var out []byte
	var err error
	switch pt {
	case types.JSONPatchType:
		out, err = applyJSONPatch(ctx, cur, patch, s.opts.MaxBodyBytes)
	case types.MergePatchType:
		out, err = jsonpatch.MergePatch(cur, patch)
	default:
		if err = checkStrategicMergeCost(cur, patch); err == nil {
			out, err = strategicpatch.StrategicMergePatch(cur, patch, dataStruct)
		}
	}
	if err == nil {
		err = patchBounds(ctx, out, s.opts.MaxBodyBytes)
	}
	return out, patchError(err)
}

// applyJSONPatch applies an RFC 6902 patch a chunk of operations at a time, so that a patch
// over its time, its client or its size stops between chunks instead of running to the end.
func applyJSONPatch(ctx context.Context, doc, patch []byte, maxBytes int64) ([]byte, error) {
	ops, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if len(ops) > maxJSONPatchOperations {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
			"The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(ops)))
	}
	for len(ops) > 0 {
		n := min(len(ops), jsonPatchChunk)
		if doc, err = ops[:n].Apply(doc); err != nil {
			return nil, err
		}
		ops = ops[n:]
		if err := patchBounds(ctx, doc, maxBytes); err != nil {
			return nil, err
		}
	}
	return doc, nil
}

// errPatchTooLarge marks a patched document over the request body limit.
var errPatchTooLarge = errors.New("the patched object is larger than the request body limit")

// patchBounds is the check between steps of a patch: still in time, client still there, and
// the document no larger than a request body may be.
func patchBounds(ctx context.Context, doc []byte, maxBytes int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if int64(len(doc)) > maxBytes {
		return fmt.Errorf("%w: %d > %d bytes", errPatchTooLarge, len(doc), maxBytes)
	}
	return nil
}

// patchError turns a failed patch into the status kube-apiserver answers with.
func patchError(err error) error {
	var se apierrors.APIStatus
	var copyErr *jsonpatch.AccumulatedCopySizeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return err
	case errors.Is(err, context.DeadlineExceeded):
		return apierrors.NewTimeoutError("request did not complete within requested timeout - "+err.Error(), 0)
	case errors.Is(err, context.Canceled):
		return err // the client has gone: nobody reads the answer
	case errors.Is(err, errPatchTooLarge):
		return apierrors.NewRequestEntityTooLargeError(err.Error())
	case errors.As(err, &copyErr):
		// kube-apiserver's 422 for this drops the library's message; it is kept here.
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure,
			Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid, Message: err.Error()}}
	}
	return apierrors.NewBadRequest("the patch could not be applied: " + err.Error())
}

// apply is server-side apply: structured-merge-diff merges the applied configuration into the
// object (or a new one when it is missing) by the kind's schema, and the manager's managedFields
// entry decides which fields it gives up, which it keeps and where it conflicts with another
// manager (409 unless force).
func (s *Server) apply(ctx context.Context, k *schemas.Kind, ns, name, sub string, body []byte, wo writeOptions) (runtime.Object, bool, error) {
	if sub == "scale" {
		return nil, false, badRequest("server-side apply of the scale subresource is not supported: apply the %s, or patch its scale", k.GVK.Kind)
	}
	patchJSON, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, false, badRequest("apply configuration: %v", err)
	}
	// A strict decode first, so that a bad field is refused with its path and nothing written.
	strict := wo
	strict.strict = true
	applied, err := s.decodeBody(k, patchJSON, strict)
	if err != nil {
		return nil, false, err
	}
	if mustMeta(applied).GetName() != name {
		return nil, false, badRequest("the name of the applied object (%s) does not match the name on the URL (%s)", mustMeta(applied).GetName(), name)
	}
	config := &unstructured.Unstructured{}
	// Integers as int64, as every unstructured object holds them (custom resources' CEL rules
	// and schema types tell int from float).
	if err := utiljson.Unmarshal(patchJSON, &config.Object); err != nil {
		return nil, false, badRequest("apply configuration: %v", err)
	}
	fm, err := fieldManagerFor(k, sub)
	if err != nil {
		return nil, false, apierrors.NewInternalError(err)
	}
	force, _ := parseForce(wo.force) // checked with the other patch options
	merge := func(live runtime.Object) (runtime.Object, error) {
		return fm.Apply(live, config.DeepCopy(), wo.fieldManager, force != nil && *force)
	}
	wo.applied = true
	for {
		obj, err := s.guaranteedUpdate(ctx, k, ns, name, sub, "patch", wo, edited(func(cur runtime.Object) (runtime.Object, error) {
			// Only a resourceVersion the configuration sets pins the write.
			mustMeta(cur).SetResourceVersion("")
			return merge(cur)
		}))
		if !apierrors.IsNotFound(err) || sub != "" {
			return obj, false, err
		}
		empty := k.New()
		setTypeMeta(empty, k)
		created, err := merge(empty)
		if err != nil {
			return nil, false, err
		}
		obj, err = s.createObject(ctx, k, ns, created, wo)
		if !apierrors.IsAlreadyExists(err) {
			return obj, err == nil, err
		} // created meanwhile by another writer: apply to it
	}
}

// patchTypes are the body types a patch takes.
var patchTypes = []string{"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"}
