package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/schemas"
)

// patch applies a JSON, merge, strategic-merge or apply patch to the stored object and writes
// the result through the same update path as PUT.
func (s *Server) patch(ctx context.Context, k *schemas.Kind, ns, name, sub, contentType string, body []byte, wo writeOptions) (runtime.Object, error) {
	pt := types.PatchType(strings.TrimSpace(strings.Split(contentType, ";")[0]))
	switch pt {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType:
	case types.ApplyYAMLPatchType:
		return s.apply(ctx, k, ns, name, sub, body, wo)
	default:
		return nil, unsupportedMediaType(contentType)
	}
	if len(body) == 0 {
		return nil, badRequest("the patch body is empty")
	}
	if sub == "scale" {
		return s.patchScale(ctx, k, ns, name, pt, body, wo)
	}
	return s.guaranteedUpdate(ctx, k, ns, name, sub, "patch", wo, func(cur runtime.Object) (runtime.Object, error) {
		// The stored revision is left out, so only a resourceVersion the patch itself sets
		// pins the write (and turns a lost race into 409 instead of a retry).
		mustMeta(cur).SetResourceVersion("")
		curJSON, err := json.Marshal(cur)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		out, err := applyPatch(pt, curJSON, body, k.New())
		if err != nil {
			return nil, apierrors.NewBadRequest("the patch could not be applied: " + err.Error())
		}
		return s.decodeBody(k, out, wo)
	})
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
	out, err := applyPatch(pt, curJSON, body, &autoscalingv1.Scale{})
	if err != nil {
		return nil, apierrors.NewBadRequest("the patch could not be applied: " + err.Error())
	}
	return s.updateScale(ctx, k, ns, name, out, wo)
}

// applyPatch applies a patch of type pt; dataStruct tells strategic merge the Go type.
func applyPatch(pt types.PatchType, cur, patch []byte, dataStruct runtime.Object) ([]byte, error) {
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, err
		}
		return p.Apply(cur)
	case types.MergePatchType:
		return jsonpatch.MergePatch(cur, patch)
	default:
		return strategicpatch.StrategicMergePatch(cur, patch, dataStruct)
	}
}

// apply is a simplified server-side apply: the applied configuration is created when the object
// is missing and strategically merged into it otherwise. Field ownership is not tracked, so a
// field removed from the applied configuration is not removed from the object.
func (s *Server) apply(ctx context.Context, k *schemas.Kind, ns, name, sub string, body []byte, wo writeOptions) (runtime.Object, error) {
	patchJSON, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, badRequest("apply configuration: %v", err)
	}
	wo.strict = true
	applied, err := s.decodeBody(k, patchJSON, wo)
	if err != nil {
		return nil, err
	}
	if mustMeta(applied).GetName() != name {
		return nil, badRequest("the name of the applied object (%s) does not match the name on the URL (%s)", mustMeta(applied).GetName(), name)
	}
	if _, err := s.get(ctx, k, ns, name); apierrors.IsNotFound(err) && sub == "" {
		return s.createObject(ctx, k, ns, applied, wo)
	}
	return s.patch(ctx, k, ns, name, sub, string(types.StrategicMergePatchType), patchJSON, wo)
}

func unsupportedMediaType(ct string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format %q - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml", ct),
	}}
}
