package apiserver_test

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/schemastest"
)

// Every malformed manifest of the shared corpus, sent as a create, gets a 4xx whose message
// names the field, and nothing reaches the log.
func TestBadManifestCorpusThroughTheAPI(t *testing.T) {
	a, cp := newAPI(t)
	podKind, _ := schemas.ByResource("", "v1", "pods")
	var table []string
	for _, c := range schemastest.BadManifests(t) {
		k := podKind
		var tm metav1.TypeMeta
		if yaml.Unmarshal(c.Data, &tm) == nil {
			if found, ok := schemas.ByGVK(tm.GroupVersionKind()); ok {
				k = found
			}
		}
		before := cp.Log.Rev()
		code, out := a.do("POST", apiclient.Path(k, "default", "", "")+"?fieldValidation=Strict", "application/yaml", string(c.Data))
		msg := fmt.Sprint(out["message"])
		if code < 400 || code > 499 {
			t.Errorf("%s: want a 4xx, got %d: %s", c.File, code, msg)
		}
		if c.Stage == schemastest.StageValidate && c.Path != "" && !strings.Contains(msg, c.Path) {
			t.Errorf("%s: the error does not name %s: %s", c.File, c.Path, msg)
		}
		if after := cp.Log.Rev(); after != before {
			t.Errorf("%s: refused, but the log moved from %d to %d", c.File, before, after)
		}
		table = append(table, fmt.Sprintf("| %s | %d | %s | rev %d = %d |", c.File, code, strings.ReplaceAll(msg, "|", "/"), before, cp.Log.Rev()))
	}
	t.Log("\n" + strings.Join(table, "\n"))
}
