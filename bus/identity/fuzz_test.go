package identity

import "testing"

// The apiserver names the caller from the subject a request arrived on: no subject panics it,
// and a subject it accepts is exactly the one that identity publishes to.
func FuzzFromAPISubject(f *testing.F) {
	for _, s := range []string{"skiff.api", "skiff.api.admin", "skiff.api.node_n1_example_com", "skiff.api.node_", "skiff.api.apiserver", "skiff.api.x.y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subject string) {
		id, err := FromAPISubject(subject)
		if err != nil {
			return
		}
		if got := id.APISubject(); got != subject {
			t.Fatalf("%q -> %+v -> %q", subject, id, got)
		}
	})
}
