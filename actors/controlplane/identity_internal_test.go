package controlplane

import (
	"strings"
	"testing"
)

// The identity names this replica's announcement in the leases bucket, so it must be a KV key
// token: a hostname that is not (a bare VM's "(none)") is rewritten, a flag value is refused.
func TestIdentityIsAKeyToken(t *testing.T) {
	if err := validIdentity(defaultIdentity()); err != nil {
		t.Fatalf("default identity: %v", err)
	}
	for _, ok := range []string{"srv1", "node-a.example_1", "a=b"} {
		if err := validIdentity(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "(none)", "a b", "a..b", ".a", "a.", "a*", "a>"} {
		err := validIdentity(bad)
		if err == nil || !strings.Contains(err.Error(), "--identity") {
			t.Errorf("%q: %v, want an error naming --identity", bad, err)
		}
	}
}
