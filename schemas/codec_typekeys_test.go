package schemas

import (
	"strings"
	"testing"
)

// A body of another kind is refused as such whichever way its type keys are spelled, as
// encoding/json reads them (without case), before any complaint about its fields.
func TestDecodeObjectRefusesAnotherKindHoweverSpelled(t *testing.T) {
	k, _ := ByResource("", "v1", "pods")
	for _, body := range []string{
		`{"apiVersion":"v1","kind":"Service","metadata":{"name":"p"},"spec":{"ports":[{"port":80}]}}`,
		`{"apiVersion":"v1","KIND":"Service","metadata":{"name":"p"}}`,
		`{"ApiVersion":"apps/v1","metadata":{"name":"p"}}`,
		"{\"apiVersion\":\"v1\",\"\u212aind\":\"Service\",\"metadata\":{\"name\":\"p\"}}",
	} {
		for _, strict := range []bool{false, true} {
			_, err := DecodeObject(k, []byte(body), strict)
			if err == nil || !strings.Contains(err.Error(), "but the request is for Pod") {
				t.Errorf("strict %v, %s: %v", strict, body, err)
			}
		}
	}
	for _, body := range []string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"kind":"KIND"}}}`,
		`{"metadata":{"name":"p"}}`,
	} {
		obj, err := DecodeObject(k, []byte(body), true)
		if err != nil || obj.GetObjectKind().GroupVersionKind() != k.GVK {
			t.Errorf("%s: %v %v", body, obj, err)
		}
	}
	if _, err := DecodeObject(k, []byte(`{"kind":"Pod","spec":{"containers":[{"nmae":"c"}]}}`), true); err == nil ||
		!strings.Contains(err.Error(), "nmae") {
		t.Errorf("unknown field: %v", err)
	}
}
