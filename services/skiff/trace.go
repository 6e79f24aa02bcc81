package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/skiff-sh/skiff/actors/apiwire"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/internal/spanstore"
	"github.com/skiff-sh/skiff/schemas"
)

func newTrace(g *globals) *cobra.Command {
	var last bool
	var id, output string
	cmd := &cobra.Command{
		Use:   "trace (KIND/NAME | --last | --id TRACE_ID)",
		Short: "Draw a recent trace as a waterfall and its critical path: the latest one that touched an object, or the latest apply",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := traceQuery(args, last, id, g.namespace)
			if err != nil {
				return err
			}
			if output != "" && output != "json" {
				return fmt.Errorf("-o: only json is supported, got %q", output)
			}
			res, err := fetchTrace(cmd.Context(), g.client(), q)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "trace %s\n", res.TraceID)
			if err := spanstore.Render(cmd.OutOrStdout(), res.Spans, 0); err != nil {
				return err
			}
			// What the object's latest work waited on: "why is this pod not Running yet".
			return spanstore.RenderCriticalPath(cmd.OutOrStdout(), res.Spans)
		},
	}
	cmd.Flags().BoolVar(&last, "last", false, "the latest \"skiff apply\" (or, without its client span, the latest write)")
	cmd.Flags().StringVar(&id, "id", "", "the trace with this id")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json prints the spans instead of the waterfall")
	return cmd
}

// traceQuery turns the command line into the query of the apiserver's trace endpoint.
func traceQuery(args []string, last bool, id, namespace string) (url.Values, error) {
	chosen := 0
	for _, set := range []bool{len(args) == 1, last, id != ""} {
		if set {
			chosen++
		}
	}
	if chosen != 1 {
		return nil, fmt.Errorf("give exactly one of KIND/NAME, --last or --id")
	}
	switch {
	case last:
		return url.Values{"last": {"apply"}}, nil
	case id != "":
		return url.Values{"trace": {id}}, nil
	}
	kind, name, ok := strings.Cut(args[0], "/")
	if !ok || kind == "" || name == "" {
		return nil, fmt.Errorf("argument %q: want KIND/NAME, e.g. deploy/web", args[0])
	}
	k, found := schemas.Lookup(kind)
	if !found {
		return nil, fmt.Errorf("argument %q: the server doesn't have a resource type %q", args[0], kind)
	}
	ns := ""
	if k.Namespaced {
		ns = namespace
	}
	return url.Values{"object": {spanstore.ObjectKey(k.Resource, ns, name)}}, nil
}

func fetchTrace(ctx context.Context, c *apiclient.Client, q url.Values) (spanstore.Result, error) {
	var res spanstore.Result
	body, err := c.Raw(ctx, http.MethodGet, spanstore.TracePath+"?"+q.Encode(), "", nil)
	if err != nil {
		if apierrors.IsNotFound(err) && !strings.Contains(err.Error(), "trace") {
			return res, fmt.Errorf("traces: %w (this server keeps no spans: the span store runs in `skiff up`)", err)
		}
		return res, fmt.Errorf("traces: %w", err)
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return res, fmt.Errorf("traces: bad answer: %w", err)
	}
	return res, nil
}

// apiServerSpans sends a process's spans to the apiserver's span store over t (a node agent's
// NATS API subject: no token or certificate needed), so `skiff trace` shows remote nodes'
// work too. Spans are best-effort: a control plane without a store just drops them.
func apiServerSpans(ctx context.Context, t apiclient.Transport, logger *slog.Logger) (sdktrace.SpanProcessor, error) {
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL("http://apiserver"+spanstore.OTLPPath),
		otlptracehttp.WithHTTPClient(&http.Client{Transport: wireRoundTripper{t}}))
	if err != nil {
		return nil, err
	}
	return sdktrace.NewBatchSpanProcessor(&quietExporter{SpanExporter: exp, logger: logger}), nil
}

// wireRoundTripper carries an HTTP request to the apiserver as a WireRequest.
type wireRoundTripper struct{ t apiclient.Transport }

func (w wireRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	resp, err := w.t.Do(r.Context(), apiwire.Request{Method: r.Method, Path: r.URL.RequestURI(), ContentType: r.Header.Get("Content-Type"), Body: body})
	if err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: resp.Code, Status: fmt.Sprintf("%d %s", resp.Code, http.StatusText(resp.Code)),
		Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(resp.Body)), ContentLength: int64(len(resp.Body)), Request: r}, nil
}

// quietExporter logs the first failed export and drops the rest silently, so a control plane
// that keeps no spans costs the node one log line, not one per batch.
type quietExporter struct {
	sdktrace.SpanExporter
	logger *slog.Logger
	warned atomic.Bool
}

func (q *quietExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := q.SpanExporter.ExportSpans(ctx, spans); err != nil && !q.warned.Swap(true) {
		q.logger.Warn("spans are not reaching the apiserver's span store (further failures are not logged)", "err", err)
	}
	return nil
}

// spansToServer is where the CLI's own spans go: the span store of the apiserver it talks to,
// with the same credentials; failures stay quiet (nil when no exporter can be made).
func (g *globals) spansToServer(ctx context.Context) sdktrace.SpanProcessor {
	p, err := apiServerSpans(ctx, g.transport(), slog.New(slog.DiscardHandler))
	if err != nil {
		return nil
	}
	return p
}
