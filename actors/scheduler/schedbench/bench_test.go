package schedbench

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// A small run of the same benchmark proves it works end to end.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	var buf bytes.Buffer
	if err := Run(&buf, Options{Nodes: 20, Pods: 200, Workers: 4}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "bound/s") {
		t.Fatalf("no table: %s", buf.String())
	}
	t.Log("\n" + buf.String())
}

func TestRunFull(t *testing.T) {
	if testing.Short() || !strings.Contains(t.Name(), "Full") || testingFull == "" {
		t.Skip("set SKIFF_SCHEDBENCH_FULL=1 for the full-size run")
	}
	var buf bytes.Buffer
	if err := Run(&buf, Options{}); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + buf.String())
}

var testingFull = os.Getenv("SKIFF_SCHEDBENCH_FULL")
