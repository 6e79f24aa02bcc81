package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/schemas"
)

func newDescribe(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe TYPE NAME",
		Short: "Show an object's details and the events about it",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kinds, err := kindsArg(args[0])
			if err != nil || len(kinds) != 1 {
				return fmt.Errorf("describe takes one TYPE: %v", err)
			}
			k := kinds[0]
			ns := g.namespace
			if !k.Namespaced {
				ns = ""
			}
			c := g.client()
			body, err := c.Raw(cmd.Context(), http.MethodGet, apiclient.Path(k, ns, args[1], ""), "", nil)
			if err != nil {
				return err
			}
			events, err := eventsFor(cmd, c, ns, k.GVK.Kind, args[1])
			if err != nil {
				return err
			}
			return describe(cmd.OutOrStdout(), body, events, time.Now())
		},
	}
}

func eventsFor(cmd *cobra.Command, c *apiclient.Client, ns, kind, name string) ([]*corev1.Event, error) {
	ek, _ := schemas.ByResource("", "v1", "events")
	q := url.Values{"fieldSelector": {"involvedObject.kind=" + kind + ",involvedObject.name=" + name}}
	objs, _, err := c.List(cmd.Context(), ek, ns, q)
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Event, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*corev1.Event))
	}
	sort.Slice(out, func(i, j int) bool { return lastSeen(out[i]).Before(lastSeen(out[j])) })
	return out, nil
}

func lastSeen(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// describe prints the object's metadata, spec and status in a readable YAML form, then Events
// as kubectl describe shows them.
func describe(w io.Writer, body []byte, events []*corev1.Event, now time.Time) error {
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		return err
	}
	meta, _ := obj["metadata"].(map[string]any)
	fmt.Fprintf(w, "Name:         %v\n", meta["name"])
	if ns, ok := meta["namespace"]; ok {
		fmt.Fprintf(w, "Namespace:    %v\n", ns)
	}
	fmt.Fprintf(w, "Kind:         %v\n", obj["kind"])
	for _, key := range []string{"labels", "annotations"} {
		fmt.Fprintf(w, "%-14s%s\n", strings.ToUpper(key[:1])+key[1:]+":", mapLine(meta[key]))
	}
	fmt.Fprintf(w, "Created:      %v\n", meta["creationTimestamp"])
	fmt.Fprintf(w, "Revision:     %v\n", meta["resourceVersion"])
	for _, section := range []string{"spec", "status", "data"} {
		v, ok := obj[section]
		if !ok {
			continue
		}
		out, _ := yaml.Marshal(v)
		fmt.Fprintf(w, "%s:\n", strings.ToUpper(section[:1])+section[1:])
		for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
	if len(events) == 0 {
		_, err := fmt.Fprintln(w, "Events:       <none>")
		return err
	}
	fmt.Fprintln(w, "Events:")
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  Type\tReason\tAge\tFrom\tMessage")
	for _, e := range events {
		age := schemas.HumanDuration(now.Sub(lastSeen(e)))
		if e.Count > 1 {
			age = fmt.Sprintf("%s (x%d over %s)", age, e.Count, schemas.HumanDuration(now.Sub(e.FirstTimestamp.Time)))
		}
		from := e.Source.Component
		if from == "" {
			from = e.ReportingController
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, age, from, e.Message)
	}
	return tw.Flush()
}

func mapLine(v any) string {
	m, _ := v.(map[string]any)
	if len(m) == 0 {
		return "<none>"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, "\n              ")
}
