package statelogbench

import (
	"bytes"
	"strings"
	"testing"
)

func TestRunBench(t *testing.T) {
	if testing.Short() {
		t.Skip("benchmark run skipped in -short mode")
	}
	var buf bytes.Buffer
	if err := RunBench(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"creates/s sequential", "creates/s 8 concurrent", "100 watchers"} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q in:\n%s", want, out)
		}
	}
	t.Log("\n" + out)
}
