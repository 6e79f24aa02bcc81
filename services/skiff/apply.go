package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/internal/tracing"
	"github.com/skiff-sh/skiff/schemas"
)

func newApply(g *globals) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|-",
		Short: "Create or update objects from manifests",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return fmt.Errorf("-f is required")
			}
			ms, err := readManifests(files)
			if err != nil {
				return err
			}
			ctx, done, err := startApplySpan(cmd.Context(), files, tracing.WithProcessor(g.spansToServer(cmd.Context())))
			if err != nil {
				return err
			}
			c := g.client()
			for _, m := range ms {
				result, err := applyOne(ctx, c, g.namespace, m.doc)
				if err != nil {
					done(err)
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), result)
			}
			done(nil)
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "manifest file, directory, or - for stdin")
	return cmd
}

// startApplySpan opens the root span "skiff apply": every request of one apply carries its
// traceparent, so the whole journey it causes (controllers, scheduler, kubelet, proxy) is one
// trace. The span is exported where the standard OTEL_EXPORTER_OTLP_* variables say; with
// tracing off here a local provider still mints the trace id, so the servers' spans of this
// apply share it; opts add where else it goes (the apiserver's span store). done ends the span
// and flushes.
func startApplySpan(ctx context.Context, files []string, opts ...tracing.Option) (context.Context, func(error), error) {
	shutdown, err := tracing.Setup(ctx, "skiff-cli", "", opts...)
	if err != nil {
		return nil, nil, err
	}
	attrs := trace.WithAttributes(attribute.StringSlice("skiff.files", files))
	sctx, span := otel.Tracer("skiff/cli").Start(ctx, "skiff apply", attrs, trace.WithSpanKind(trace.SpanKindClient))
	if !span.SpanContext().IsValid() {
		sctx, span = sdktrace.NewTracerProvider().Tracer("skiff/cli").Start(ctx, "skiff apply", attrs, trace.WithSpanKind(trace.SpanKindClient))
	}
	return sctx, func(err error) {
		tracing.End(span, err)
		flushTraces(shutdown)
	}, nil
}

// applyOne creates the object, or applies it (server-side) over the existing one.
func applyOne(ctx context.Context, c *apiclient.Client, defaultNS string, d schemas.Document) (string, error) {
	k, _ := schemas.ByGVK(d.GVK)
	m := d.Object.(metav1.Object)
	ns := ""
	if k.Namespaced {
		ns = m.GetNamespace()
		if ns == "" {
			ns = defaultNS
			m.SetNamespace(ns)
		}
	}
	name := qualifiedName(k, m.GetName())
	body, err := json.Marshal(d.Object)
	if err != nil {
		return "", err
	}
	cur, err := c.Get(ctx, k, ns, m.GetName())
	if apierrors.IsNotFound(err) {
		// Created with a POST, so the trace of an apply starts with "create <resource>".
		q := url.Values{"fieldValidation": {"Strict"}, "fieldManager": {"skiff"}}
		if _, err := c.Raw(ctx, http.MethodPost, apiclient.Path(k, ns, "", "")+"?"+q.Encode(), "application/json", body); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		return name + " created", nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	// A server-side apply as manager "skiff", forced: the manifest is the truth here, as it was
	// when apply overwrote, so fields another manager set are taken back, not a conflict.
	q := url.Values{"fieldValidation": {"Strict"}, "fieldManager": {"skiff"}, "force": {"true"}}
	out, err := c.Raw(ctx, http.MethodPatch, apiclient.Path(k, ns, m.GetName(), "")+"?"+q.Encode(), "application/apply-patch+yaml", body)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	var got metav1.PartialObjectMetadata
	if err := json.Unmarshal(out, &got); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	if got.GetResourceVersion() == cur.(metav1.Object).GetResourceVersion() {
		return name + " unchanged", nil
	}
	return name + " configured", nil
}
