package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/internal/metrics"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// A process without an apiserver serves /metrics on its own listener, with what its packages
// registered and the Go runtime collectors; the listener goes when ctx ends.
func TestServeExposesRegisteredMetrics(t *testing.T) {
	c := metrics.Counter("skiff_test_things_total", "Things counted by the test.", "kind")
	c.WithLabelValues("a").Add(3)
	if again := metrics.Counter("skiff_test_things_total", "Things counted by the test.", "kind"); again != c {
		t.Fatal("registering the same counter twice did not return the first one")
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr, err := metrics.Serve(ctx, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`skiff_test_things_total{kind="a"} 3`, "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	cancel()
	testutil.Eventually(t, 5*time.Second, 20*time.Millisecond, func() error {
		resp, err := http.Get("http://" + addr.String() + "/metrics")
		if err != nil {
			return nil
		}
		resp.Body.Close()
		return fmt.Errorf("the metrics listener still answers after ctx ended")
	})
	if a, err := metrics.Serve(context.Background(), "", nil); a != nil || err != nil {
		t.Fatalf(`Serve("") = %v, %v; want nothing served`, a, err)
	}
}
