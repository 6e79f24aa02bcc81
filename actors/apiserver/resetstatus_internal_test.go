package apiserver

import (
	"bytes"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/schemas"
)

// Resetting a typed object's status in place stores the same bytes as the round trip through
// its map shape, non-canonical quantities, empty lists and a client-set status included.
func TestResetStatusInPlaceStoresWhatTheMapRoundTripDid(t *testing.T) {
	cases := []struct{ resource, group, body string }{
		{"pods", "", `{"metadata":{"name":"p","labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i","args":[],
			"resources":{"requests":{"cpu":"0.1","memory":"128974848"},"limits":{"cpu":"1000m","memory":"1Gi"}}}],"tolerations":[]},
			"status":{"phase":"Running","podIP":"10.0.0.5","conditions":[{"type":"Ready","status":"True"}]}}`},
		{"deployments", "apps", `{"metadata":{"name":"d"},"spec":{"replicas":3,"selector":{"matchLabels":{"a":"b"}},
			"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}},"status":{"replicas":7}}`},
		{"services", "", `{"metadata":{"name":"s"},"spec":{"ports":[{"port":80,"targetPort":"http"}]},
			"status":{"loadBalancer":{"ingress":[{"ip":"1.2.3.4"}]}}}`},
	}
	s := &Server{}
	for _, tc := range cases {
		k, ok := schemas.ByResource(tc.group, "v1", tc.resource)
		if !ok {
			t.Fatalf("no kind for %s", tc.resource)
		}
		stored := func(reset func(*schemas.Kind, runtime.Object) (runtime.Object, error)) []byte {
			obj := k.New()
			if err := json.Unmarshal([]byte(tc.body), obj); err != nil {
				t.Fatal(err)
			}
			obj, err := reset(k, obj)
			if err != nil {
				t.Fatal(err)
			}
			data, err := encodeForStorage(obj)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
		inPlace, byMap := stored(s.resetStatus), stored(statusResetByMap)
		if !bytes.Equal(inPlace, byMap) {
			t.Errorf("%s: reset in place stores\n%s\nthe map round trip stored\n%s", tc.resource, inPlace, byMap)
		}
		// What is stored (protobuf) read back and served as JSON: no status of the client's.
		obj, err := decodeStored(k, inPlace, 1)
		if err != nil {
			t.Fatal(err)
		}
		served, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(served, []byte("10.0.0.5")) || bytes.Contains(served, []byte(`"replicas":7`)) || bytes.Contains(served, []byte("1.2.3.4")) {
			t.Errorf("%s: the client's status was kept: %s", tc.resource, served)
		}
		if !bytes.Contains(served, []byte(`"name":"c"`)) && !bytes.Contains(served, []byte(`"port":80`)) {
			t.Errorf("%s: the spec was not stored: %s", tc.resource, served)
		}
	}
}
