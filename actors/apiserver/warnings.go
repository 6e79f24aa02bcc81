package apiserver

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/skiff-sh/skiff/schemas"
)

// warnings adds Warning response headers as kube-apiserver sends them (RFC 7234 code 299,
// agent "-", the text quoted), each text once; client-go prints them as "Warning: <text>".
// They are added before the handler writes its response, so they travel with it.
type warnings struct {
	h    http.Header
	seen map[string]bool
}

func newWarnings(w http.ResponseWriter) *warnings {
	return &warnings{h: w.Header(), seen: map[string]bool{}}
}

func (w *warnings) add(text string) {
	if w == nil || w.seen[text] {
		return
	}
	w.seen[text] = true
	escaped := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(text)
	w.h.Add("Warning", `299 - "`+escaped+`"`)
}

// droppedFields warns of each unknown or duplicate field a write's decoding dropped, in
// Kubernetes' words: `unknown field "spec.foo"`, `duplicate field "metadata.name"`.
func (w *warnings) droppedFields(fields []schemas.FieldError) {
	for _, f := range fields {
		w.add(fmt.Sprintf("%s %q", f.Detail, f.Path))
	}
}

// fieldValidation reads the fieldValidation parameter: Ignore, Warn (the default) or Strict.
func fieldValidation(v string) (string, error) {
	switch strings.ToLower(v) {
	case "", "warn":
		return "Warn", nil
	case "ignore":
		return "Ignore", nil
	case "strict":
		return "Strict", nil
	}
	return "", badRequest(`fieldValidation: Unsupported value: %q: supported values: "Ignore", "Strict", "Warn"`, v)
}
