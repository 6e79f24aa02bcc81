package apibench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/internal/spanstore"
	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
)

// RunTracingOverhead measures HTTP create throughput with tracing off and with every request
// sampled (spans kept in the embedded span store and batched to an exporter that drops them), each
// on a fresh control plane, and prints the ratio.
func RunTracingOverhead(w io.Writer, o Options) error {
	o.defaults()
	prev := otel.GetTracerProvider()
	defer otel.SetTracerProvider(prev)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	measure := func(tag string) (float64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cp, stop, err := controlplane.StartScratch(ctx, "skiff-tracebench-")
		if err != nil {
			return 0, err
		}
		defer stop()
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
		if _, err := creates(ctx, client, cp.URL(), tag+"-warm", o.Workers, o.Creates/4); err != nil {
			return 0, err
		}
		return creates(ctx, client, cp.URL(), tag, o.Workers, o.Creates)
	}
	// As `skiff up` runs it: every span into the embedded store, and batched to an exporter.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(spanstore.New(spanstore.Options{})), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer tp.Shutdown(context.Background())
	// Alternate the two settings and keep the median of each, so drift in the machine's load
	// does not land on one side.
	var offs, ons []float64
	for round := range 3 {
		otel.SetTracerProvider(noop.NewTracerProvider())
		off, err := measure(fmt.Sprintf("off%d", round))
		if err != nil {
			return err
		}
		otel.SetTracerProvider(tp)
		on, err := measure(fmt.Sprintf("on%d", round))
		if err != nil {
			return err
		}
		offs, ons = append(offs, off), append(ons, on)
	}
	off, on := median(offs), median(ons)
	t := benchutil.NewTable(w, "tracing overhead (median of 3)", "creates/s", "")
	t.Row("tracing off", fmt.Sprintf("%.0f", off), "")
	t.Row("tracing on, every request sampled", fmt.Sprintf("%.0f", on), fmt.Sprintf("on/off %.2f, cost %.1f%%", on/off, 100*(1-on/off)))
	return t.Flush()
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}
