package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// countingPatch adds n labels, one operation each, so the result shows every operation ran.
func countingPatch(n int) []byte {
	ops := []string{`{"op":"add","path":"/metadata/labels","value":{}}`}
	for i := 0; i < n; i++ {
		ops = append(ops, fmt.Sprintf(`{"op":"add","path":"/metadata/labels/l%d","value":"%d"}`, i, i))
	}
	return []byte("[" + strings.Join(ops, ",") + "]")
}

const patchDoc = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`

// Applying in chunks gives what one Apply of the whole patch gives.
func TestJSONPatchInChunksIsOnePatch(t *testing.T) {
	patch := countingPatch(2*jsonPatchChunk + 7)
	got, err := applyJSONPatch(context.Background(), []byte(patchDoc), patch, DefaultMaxBodyBytes)
	if err != nil {
		t.Fatal(err)
	}
	ops, _ := jsonpatch.DecodePatch(patch)
	want, err := ops.Apply([]byte(patchDoc))
	if err != nil {
		t.Fatal(err)
	}
	if !jsonpatch.Equal(got, want) {
		t.Fatalf("chunked result differs from one Apply")
	}
	var obj struct {
		Metadata struct{ Labels map[string]string }
	}
	_ = json.Unmarshal(got, &obj)
	if len(obj.Metadata.Labels) != 2*jsonPatchChunk+7 {
		t.Fatalf("%d labels, want %d", len(obj.Metadata.Labels), 2*jsonPatchChunk+7)
	}
}

// A patch stops between chunks once its client has gone or its time is up.
func TestJSONPatchStopsWithItsContext(t *testing.T) {
	patch := countingPatch(2 * jsonPatchChunk)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := applyJSONPatch(gone, []byte(patchDoc), patch, DefaultMaxBodyBytes); err != context.Canceled {
		t.Fatalf("client gone: %v, want context.Canceled", err)
	}
	late, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	_, err := applyJSONPatch(late, []byte(patchDoc), patch, DefaultMaxBodyBytes)
	if st := patchError(err); !apierrors.IsTimeout(st) || st.(apierrors.APIStatus).Status().Code != http.StatusGatewayTimeout {
		t.Fatalf("past its time: %v, want 504 Timeout", st)
	}
}
