package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/schemas"
)

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

type getOptions struct {
	output        string
	selector      string
	fieldSelector string
	allNamespaces bool
	watch         bool
}

func newGet(g *globals) *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:   "get TYPE[,TYPE...] [NAME]",
		Short: "List objects as tables (like kubectl), or as YAML/JSON",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kinds, err := kindsArg(args[0])
			if err != nil {
				return err
			}
			name := ""
			if len(args) == 2 {
				name = args[1]
			}
			return runGet(cmd, g, o, kinds, name)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "", "yaml, json, wide or name")
	f.StringVarP(&o.selector, "selector", "l", "", "label selector")
	f.StringVar(&o.fieldSelector, "field-selector", "", "field selector")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "all namespaces")
	f.BoolVarP(&o.watch, "watch", "w", false, "after listing, watch for changes")
	return cmd
}

func (o *getOptions) query() url.Values {
	q := url.Values{}
	if o.selector != "" {
		q.Set("labelSelector", o.selector)
	}
	if o.fieldSelector != "" {
		q.Set("fieldSelector", o.fieldSelector)
	}
	return q
}

func runGet(cmd *cobra.Command, g *globals, o *getOptions, kinds []*schemas.Kind, name string) error {
	ns := g.namespace
	if o.allNamespaces {
		ns = ""
	}
	out := cmd.OutOrStdout()
	switch o.output {
	case "yaml", "json":
		return printObjects(cmd, g, o, kinds, ns, name)
	case "", "wide", "name":
	default:
		return fmt.Errorf("unknown output format %q: use yaml, json, wide or name", o.output)
	}
	t := g.transport()
	for i, k := range kinds {
		if i > 0 {
			fmt.Fprintln(out)
		}
		q := o.query()
		if name != "" {
			q.Set("fieldSelector", joinSel(q.Get("fieldSelector"), "metadata.name="+name))
		}
		path := apiclient.Path(k, ns, "", "") + "?" + q.Encode()
		body, err := rawGet(cmd, t, path, tableAccept)
		if err != nil {
			return err
		}
		var table metav1.Table
		if err := json.Unmarshal(body, &table); err != nil {
			return err
		}
		if name != "" && len(table.Rows) == 0 {
			return fmt.Errorf("%s %q not found", k.Resource, name)
		}
		p := newTablePrinter(out, k, o.output, o.allNamespaces)
		if len(table.Rows) == 0 && !o.watch {
			if ns == "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "No resources found")
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "No resources found in %s namespace.\n", ns)
			}
			continue
		}
		p.print(&table, len(table.Rows) > 0 || o.watch)
		if o.watch {
			q.Set("watch", "true")
			q.Set("resourceVersion", table.ResourceVersion)
			return watchTable(cmd, t, apiclient.Path(k, ns, "", "")+"?"+q.Encode(), p)
		}
	}
	return nil
}

func joinSel(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}

func rawGet(cmd *cobra.Command, t apiclient.HTTP, path, accept string) ([]byte, error) {
	rc, err := t.Stream(cmd.Context(), path, accept)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// watchTable prints one row per watch event as it arrives.
func watchTable(cmd *cobra.Command, t apiclient.HTTP, path string, p *tablePrinter) error {
	rc, err := t.Stream(cmd.Context(), path, tableAccept)
	if err != nil {
		return err
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return err
		}
		if ev.Type == "ERROR" {
			return fmt.Errorf("watch: %s", ev.Object)
		}
		var table metav1.Table
		if ev.Type == "BOOKMARK" || json.Unmarshal(ev.Object, &table) != nil {
			continue
		}
		p.print(&table, false)
	}
	return sc.Err()
}

type tablePrinter struct {
	w         *tabwriter.Writer
	kind      *schemas.Kind
	mode      string
	namespace bool
	columns   []int
}

func newTablePrinter(out io.Writer, k *schemas.Kind, mode string, withNS bool) *tablePrinter {
	return &tablePrinter{w: tabwriter.NewWriter(out, 3, 0, 3, ' ', 0), kind: k, mode: mode, namespace: withNS && k.Namespaced}
}

func (p *tablePrinter) print(t *metav1.Table, header bool) {
	defer p.w.Flush()
	if p.mode == "name" {
		for _, r := range t.Rows {
			if len(r.Cells) > 0 {
				fmt.Fprintln(p.w, p.kind.Singular+"/"+fmt.Sprint(r.Cells[0]))
			}
		}
		return
	}
	if p.columns == nil {
		for i, c := range t.ColumnDefinitions {
			if c.Priority == 0 || p.mode == "wide" {
				p.columns = append(p.columns, i)
			}
		}
	}
	var cells []string
	if header {
		if p.namespace {
			cells = append(cells, "NAMESPACE")
		}
		for _, i := range p.columns {
			if i < len(t.ColumnDefinitions) {
				cells = append(cells, strings.ToUpper(t.ColumnDefinitions[i].Name))
			}
		}
		fmt.Fprintln(p.w, strings.Join(cells, "\t"))
	}
	for _, r := range t.Rows {
		cells = cells[:0]
		if p.namespace {
			cells = append(cells, rowNamespace(r))
		}
		for _, i := range p.columns {
			if i < len(r.Cells) {
				cells = append(cells, fmt.Sprint(r.Cells[i]))
			}
		}
		fmt.Fprintln(p.w, strings.Join(cells, "\t"))
	}
}

func rowNamespace(r metav1.TableRow) string {
	var m struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	_ = json.Unmarshal(r.Object.Raw, &m)
	return m.Metadata.Namespace
}

// printObjects prints -o yaml|json: one object as itself, several as a v1 List, like kubectl.
func printObjects(cmd *cobra.Command, g *globals, o *getOptions, kinds []*schemas.Kind, ns, name string) error {
	c := g.client()
	var items []json.RawMessage
	for _, k := range kinds {
		if name != "" {
			body, err := c.Raw(cmd.Context(), http.MethodGet, apiclient.Path(k, ns, name, ""), "", nil)
			if err != nil {
				return err
			}
			if len(kinds) == 1 {
				return printDoc(cmd.OutOrStdout(), o.output, body)
			}
			items = append(items, body)
			continue
		}
		p := apiclient.Path(k, ns, "", "")
		if q := o.query(); len(q) > 0 {
			p += "?" + q.Encode()
		}
		body, err := c.Raw(cmd.Context(), http.MethodGet, p, "", nil)
		if err != nil {
			return err
		}
		var l struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(body, &l); err != nil {
			return err
		}
		for _, it := range l.Items {
			items = append(items, withTypeMeta(it, k))
		}
	}
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]string{"resourceVersion": ""}, "items": items})
	if err != nil {
		return err
	}
	return printDoc(cmd.OutOrStdout(), o.output, list)
}

// withTypeMeta makes sure a list item says what it is.
func withTypeMeta(item json.RawMessage, k *schemas.Kind) json.RawMessage {
	var m map[string]any
	if json.Unmarshal(item, &m) != nil {
		return item
	}
	m["apiVersion"], m["kind"] = k.GVK.GroupVersion().String(), k.GVK.Kind
	out, _ := json.Marshal(m)
	return out
}

func printDoc(w io.Writer, format string, body []byte) error {
	if format == "json" {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			return err
		}
		out, _ := json.MarshalIndent(v, "", "    ")
		_, err := fmt.Fprintln(w, string(out))
		return err
	}
	out, err := yaml.JSONToYAML(body)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}
