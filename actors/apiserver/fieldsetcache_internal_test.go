package apiserver

import (
	"bytes"
	"fmt"
	"testing"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// TestFieldSetsParseOnceAndStayBounded: a set is what parsing its JSON gives, parsed once per
// distinct JSON, errors are not kept, and the cache never holds more than its bound.
func TestFieldSetsParseOnceAndStayBounded(t *testing.T) {
	var c fieldSets
	raw := []byte(`{"f:spec":{"f:holderIdentity":{},"f:renewTime":{}}}`)
	want := &fieldpath.Set{}
	if err := want.FromJSON(bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	a, err := c.get(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Equals(want) {
		t.Fatalf("cached set %v, parsed %v", a, want)
	}
	if b, _ := c.get(append([]byte(nil), raw...)); b != a {
		t.Error("the same JSON was parsed again")
	}
	if _, err := c.get([]byte(`{"f:spec":`)); err == nil {
		t.Fatal("broken JSON parsed")
	}
	if _, ok := c.entries[`{"f:spec":`]; ok {
		t.Error("a parse error was cached")
	}
	for i := range maxFieldSets + 10 {
		if _, err := c.get([]byte(fmt.Sprintf(`{"f:n%d":{}}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.entries); n > maxFieldSets {
		t.Fatalf("%d sets cached, bound %d", n, maxFieldSets)
	}
}
