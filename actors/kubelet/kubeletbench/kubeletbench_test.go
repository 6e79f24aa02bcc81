package kubeletbench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/actors/kubelet/kubelettest"
)

func TestRunBench(t *testing.T) {
	if testing.Short() {
		t.Skip("bench")
	}
	if r := kubelettest.SkipReason(); r != "" {
		t.Skip(r)
	}
	var out bytes.Buffer
	if err := RunBench(&out); err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if !strings.Contains(out.String(), "p99") {
		t.Errorf("output %q", out.String())
	}
}
