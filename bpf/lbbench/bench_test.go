package lbbench

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestRun runs a small benchmark (the full one with SKIFF_LBBENCH_FULL=1)
// and checks that both dataplanes produced every row.
func TestRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	opts := Options{Sizes: []int{100, 1000}, Connects: 300}
	if os.Getenv("SKIFF_LBBENCH_FULL") == "1" {
		opts = Options{}
	}
	var out bytes.Buffer
	if err := Run(&out, opts); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, row := range []string{"program all Services", "one endpoint change", "connect p50", "connect p99"} {
		if n := strings.Count(out.String(), row); n != len(opts.withDefaults().Sizes) {
			t.Errorf("%q appears %d times", row, n)
		}
	}
}
