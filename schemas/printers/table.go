// Package printers renders objects as the metav1.Table kubectl asks the server for ("kubectl
// get"): the same columns, in the same order, with the same cell formats as Kubernetes'
// server-side printers. Columns of priority 1 appear only with -o wide.
package printers

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// printer is the table layout of one resource: columns and a row function.
type printer struct {
	columns []metav1.TableColumnDefinition
	cells   func(obj runtime.Object, now time.Time) []any
}

var printers = map[string]printer{}

func register(resource string, p printer) { printers[resource] = p }

// Table prints objs of resource as a Table. Each row's Object carries the object itself (not yet
// serialized); objects of an unexpected type get the default NAME AGE row. Resources without a
// layout of their own use NAME AGE.
func Table(resource string, objs []runtime.Object, now time.Time) *metav1.Table {
	p, ok := printers[resource]
	if !ok {
		p = defaultPrinter
	}
	t := &metav1.Table{
		TypeMeta:          metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "Table"},
		ColumnDefinitions: p.columns,
		Rows:              make([]metav1.TableRow, 0, len(objs)),
	}
	for _, obj := range objs {
		cells := p.cells(obj, now)
		if cells == nil {
			cells = padded(defaultPrinter.cells(obj, now), len(p.columns))
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: obj}})
	}
	return t
}

// padded fills a fallback row up to the table's width so every row has one cell per column.
func padded(cells []any, n int) []any {
	for len(cells) < n {
		cells = append(cells, "")
	}
	return cells
}

// HumanDuration renders an age as kubectl does: "5s", "3m2s", "4h", "12d", "3y45d".
func HumanDuration(d time.Duration) string { return duration.HumanDuration(d) }

// Age is HumanDuration since t, "<unknown>" for a zero time.
func Age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return HumanDuration(now.Sub(t.Time))
}

func col(name, typ, desc string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Description: desc}
}

func wide(name, typ, desc string) metav1.TableColumnDefinition {
	c := col(name, typ, desc)
	c.Priority = 1
	return c
}

var (
	nameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name",
		Description: "Name must be unique within a namespace."}
	ageColumn = col("Age", "string", "Time since the object was created.")
)

var defaultPrinter = printer{
	columns: []metav1.TableColumnDefinition{nameColumn, ageColumn},
	cells: func(obj runtime.Object, now time.Time) []any {
		m, err := meta.Accessor(obj)
		if err != nil {
			return []any{"", "<unknown>"}
		}
		return []any{m.GetName(), Age(m.GetCreationTimestamp(), now)}
	},
}

// orNone is kubectl's placeholder for an empty cell.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// typed adapts a row function of one object type to a printer's; another type gets no row
// (Table falls back to NAME AGE).
func typed[T runtime.Object](cells func(obj T, now time.Time) []any) func(runtime.Object, time.Time) []any {
	return func(obj runtime.Object, now time.Time) []any {
		t, ok := obj.(T)
		if !ok {
			return nil
		}
		return cells(t, now)
	}
}
