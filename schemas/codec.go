package schemas

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Document is one typed object of a known kind read from a manifest stream. Index is the 0-based
// position of its document in the stream (empty documents are not counted); the items of a v1
// List share their List's index.
type Document struct {
	Index  int
	Object runtime.Object
	GVK    schema.GroupVersionKind
}

// FieldError is one problem with one field of a decoded body: Path is the JSON path
// ("spec.template.spec.containers[0].imagee"), Detail what is wrong with it ("unknown field").
type FieldError struct {
	Path   string
	Detail string
}

func (e FieldError) Error() string { return e.Path + ": " + e.Detail }

// DecodeError tells which document could not be decoded and why: a syntax error (Err) or
// field errors. Index is -1 for a single request body, Item -1 outside a v1 List.
type DecodeError struct {
	Index  int
	Item   int
	Kind   string
	Fields []FieldError
	Err    error
}

func (e *DecodeError) Error() string {
	var b strings.Builder
	if e.Index >= 0 {
		fmt.Fprintf(&b, "document %d", e.Index)
		if e.Item >= 0 {
			fmt.Fprintf(&b, " items[%d]", e.Item)
		}
		if e.Kind != "" {
			fmt.Fprintf(&b, " (%s)", e.Kind)
		}
	} else {
		b.WriteString(e.Kind)
	}
	b.WriteString(": ")
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	for i, f := range e.Fields {
		if i > 0 || e.Err != nil {
			b.WriteString("; ")
		}
		b.WriteString(f.Error())
	}
	return b.String()
}

func (e *DecodeError) Unwrap() error { return e.Err }

// DecodeManifests reads a multi-document YAML stream, a JSON object or a stream of JSON objects,
// expanding v1 Lists into their items. Decoding is strict: unknown and duplicate fields, missing
// apiVersion or kind, and kinds Skiff does not serve are errors. Every failing document is
// reported (errors.Join of *DecodeError) and then no documents are returned.
func DecodeManifests(data []byte) ([]Document, error) {
	raws, err := splitDocuments(data)
	if err != nil {
		return nil, err
	}
	var docs []Document
	var errs []error
	for i, raw := range raws {
		got, err := decodeDocument(i, raw)
		if err != nil {
			errs = append(errs, err...)
			continue
		}
		docs = append(docs, got...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return docs, nil
}

// splitDocuments returns each non-empty document as JSON. JSON input (starting with "{") may be a
// concatenation of objects; anything else is YAML, whose duplicate keys are errors here.
func splitDocuments(data []byte) ([][]byte, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, nil
	}
	if trimmed[0] == '{' || trimmed[0] == '[' {
		return splitJSON(trimmed)
	}
	var out [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		chunk, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, &DecodeError{Index: len(out), Item: -1, Err: err}
		}
		j, err := yaml.YAMLToJSONStrict(chunk)
		if err != nil {
			return nil, &DecodeError{Index: len(out), Item: -1, Kind: kindOfYAML(chunk), Err: fmt.Errorf("invalid YAML: %w", err)}
		}
		if t := bytes.TrimSpace(j); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			continue
		}
		out = append(out, j)
	}
}

// kindOfYAML names the kind of a document strict parsing refused (duplicate keys), if a lenient
// parse can tell.
func kindOfYAML(chunk []byte) string {
	var tm struct {
		Kind string `json:"kind"`
	}
	if yaml.Unmarshal(chunk, &tm) != nil {
		return ""
	}
	return tm.Kind
}

func splitJSON(data []byte) ([][]byte, error) {
	if data[0] == '[' {
		return nil, &DecodeError{Index: 0, Item: -1, Err: errors.New("a JSON array is not a manifest; wrap the objects in a v1 List")}
	}
	var out [][]byte
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, &DecodeError{Index: len(out), Item: -1, Err: fmt.Errorf("invalid JSON: %w", err)}
		}
		out = append(out, raw)
	}
}

// typeMeta reads apiVersion and kind without judging the rest of the document.
func typeMeta(raw []byte) (schema.GroupVersionKind, error) {
	var tm struct {
		APIVersion any `json:"apiVersion"`
		Kind       any `json:"kind"`
	}
	if err := json.Unmarshal(raw, &tm); err != nil {
		return schema.GroupVersionKind{}, errors.New("a manifest must be an object with apiVersion and kind")
	}
	av, okA := tm.APIVersion.(string)
	kind, okK := tm.Kind.(string)
	switch {
	case tm.APIVersion != nil && !okA:
		return schema.GroupVersionKind{}, errors.New("apiVersion must be a string")
	case tm.Kind != nil && !okK:
		return schema.GroupVersionKind{}, errors.New("kind must be a string")
	case av == "":
		return schema.GroupVersionKind{}, errors.New("apiVersion is not set")
	case kind == "":
		return schema.GroupVersionKind{}, errors.New("kind is not set")
	}
	gv, err := schema.ParseGroupVersion(av)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("apiVersion %q: %w", av, err)
	}
	return gv.WithKind(kind), nil
}

func decodeDocument(index int, raw []byte) ([]Document, []error) {
	gvk, err := typeMeta(raw)
	if err != nil {
		return nil, []error{&DecodeError{Index: index, Item: -1, Err: err}}
	}
	if gvk.Kind == "List" && gvk.GroupVersion() == core {
		return decodeList(index, raw)
	}
	obj, err := decodeTyped(index, -1, gvk, raw)
	if err != nil {
		return nil, []error{err}
	}
	return []Document{{Index: index, Object: obj, GVK: gvk}}, nil
}

// decodeList expands a v1 List; its items are decoded as documents of their own.
func decodeList(index int, raw []byte) ([]Document, []error) {
	var list struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]any    `json:"metadata,omitempty"`
		Items      []json.RawMessage `json:"items"`
	}
	if fe, err := strictUnmarshal(raw, &list); err != nil || len(fe) > 0 {
		return nil, []error{&DecodeError{Index: index, Item: -1, Kind: "List", Fields: fe, Err: err}}
	}
	var docs []Document
	var errs []error
	for i, item := range list.Items {
		gvk, err := typeMeta(item)
		if err != nil {
			errs = append(errs, &DecodeError{Index: index, Item: i, Err: err})
			continue
		}
		obj, err := decodeTyped(index, i, gvk, item)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		docs = append(docs, Document{Index: index, Object: obj, GVK: gvk})
	}
	return docs, errs
}

func decodeTyped(index, item int, gvk schema.GroupVersionKind, raw []byte) (runtime.Object, error) {
	k, ok := ByGVK(gvk)
	if !ok {
		return nil, &DecodeError{Index: index, Item: item, Kind: gvk.Kind, Err: unknownKind(gvk)}
	}
	obj := k.New()
	fe, err := strictUnmarshal(raw, obj)
	if err != nil || len(fe) > 0 {
		return nil, &DecodeError{Index: index, Item: item, Kind: gvk.Kind, Fields: fe, Err: err}
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

// unknownKind explains a kind Skiff does not serve, naming the served version when only the
// version is wrong.
func unknownKind(gvk schema.GroupVersionKind) error {
	for _, k := range allKinds() {
		if k.GVK.Kind == gvk.Kind {
			return fmt.Errorf("no %s in apiVersion %q; Skiff serves %s", gvk.Kind, gvk.GroupVersion(), k.GVK.GroupVersion())
		}
	}
	return fmt.Errorf("unknown kind %q in apiVersion %q", gvk.Kind, gvk.GroupVersion())
}

// strictUnmarshal decodes JSON case-sensitively and returns the unknown and duplicate fields
// (which do not stop decoding) apart from hard errors; a type mismatch becomes a field error.
func strictUnmarshal(raw []byte, into any) ([]FieldError, error) {
	strictErrs, err := kjson.UnmarshalStrict(raw, into)
	if err != nil {
		if fe, ok := hardFieldError(raw, err); ok {
			return []FieldError{fe}, nil
		}
		return nil, err
	}
	return strictFieldErrors(strictErrs), nil
}

// hardFieldError locates an error that stopped decoding: a mistyped field or a malformed
// quantity.
func hardFieldError(raw []byte, err error) (FieldError, bool) {
	if fe, ok := typeFieldError(raw, err); ok {
		return fe, true
	}
	if strings.HasPrefix(err.Error(), "quantities must match") {
		if p, ok := badQuantityPath(raw); ok {
			return FieldError{Path: p, Detail: "invalid quantity: " + err.Error()}, true
		}
	}
	return FieldError{}, false
}

func strictFieldErrors(errs []error) []FieldError {
	var out []FieldError
	for _, e := range errs {
		var fe kjson.FieldError
		if !errors.As(e, &fe) {
			out = append(out, FieldError{Path: "", Detail: e.Error()})
			continue
		}
		detail := "unknown field"
		if strings.HasPrefix(e.Error(), "duplicate field") {
			detail = "duplicate field"
		}
		out = append(out, FieldError{Path: fe.FieldPath(), Detail: detail})
	}
	return out
}

// typeFieldError turns "cannot unmarshal string into ... of type int32" into a field error.
func typeFieldError(raw []byte, err error) (FieldError, bool) {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return FieldError{Path: indexedPath(raw, te.Field, te.Value), Detail: fmt.Sprintf("invalid type: expected %s, got %s", te.Type, te.Value)}, true
	}
	return FieldError{}, false
}

// DecodeObject decodes one request body (JSON, or YAML) of kind k. With strict set, unknown and
// duplicate fields are errors. A body naming another kind or version is an error; one naming
// none gets k's. The result always has TypeMeta set.
func DecodeObject(k *Kind, data []byte, strict bool) (runtime.Object, error) {
	mode := decodeIgnore
	if strict {
		mode = decodeStrict
	}
	obj, _, err := decodeObject(k, data, mode)
	return obj, err
}

// DecodeObjectWarn decodes as DecodeObject does without strict, and also returns the unknown
// and duplicate fields it dropped (fieldValidation=Warn reports them as warnings).
func DecodeObjectWarn(k *Kind, data []byte) (runtime.Object, []FieldError, error) {
	return decodeObject(k, data, decodeWarn)
}

type decodeMode int

const (
	decodeIgnore decodeMode = iota
	decodeWarn
	decodeStrict
)

func decodeObject(k *Kind, data []byte, mode decodeMode) (runtime.Object, []FieldError, error) {
	fail := func(fe []FieldError, err error) error {
		return &DecodeError{Index: -1, Item: -1, Kind: k.GVK.Kind, Fields: fe, Err: err}
	}
	raw := bytes.TrimSpace(data)
	if len(raw) == 0 {
		return nil, nil, fail(nil, errors.New("the body is empty"))
	}
	if raw[0] != '{' {
		conv := yaml.YAMLToJSON
		if mode == decodeStrict {
			conv = yaml.YAMLToJSONStrict
		}
		j, err := conv(raw)
		if err != nil {
			return nil, nil, fail(nil, fmt.Errorf("the body is neither JSON nor valid YAML: %w", err))
		}
		raw = j
	}
	// The body's apiVersion and kind are checked before its fields, so a body of another kind
	// is named as such. A typed body whose type keys are spelled exactly is decoded first and
	// checked from its TypeMeta, which holds what the scan would find, in one pass instead of
	// two; the scan then runs only when decoding fails, to give the same first error.
	if k.Custom != nil || !exactTypeKeys(raw) {
		if err := checkTypeMeta(k, raw, fail); err != nil {
			return nil, nil, err
		}
	}
	if k.Custom != nil {
		obj, fe, err := decodeCustom(k, raw, mode == decodeStrict)
		if err != nil || len(fe) > 0 {
			return nil, nil, fail(fe, err)
		}
		return obj, nil, nil
	}
	obj, dropped, err := decodeInto(k, raw, mode, fail)
	if err != nil {
		if terr := checkTypeMeta(k, raw, fail); terr != nil {
			return nil, nil, terr
		}
		return nil, nil, err
	}
	if gvk := obj.GetObjectKind().GroupVersionKind(); (gvk.Kind != "" && gvk.Kind != k.GVK.Kind) ||
		(!gvk.GroupVersion().Empty() && gvk.GroupVersion() != k.GVK.GroupVersion()) {
		return nil, nil, checkTypeMeta(k, raw, fail)
	}
	obj.GetObjectKind().SetGroupVersionKind(k.GVK)
	return obj, dropped, nil
}

func decodeInto(k *Kind, raw []byte, mode decodeMode, fail func([]FieldError, error) error) (runtime.Object, []FieldError, error) {
	obj := k.New()
	var dropped []FieldError
	switch mode {
	case decodeStrict:
		if fe, err := strictUnmarshal(raw, obj); err != nil || len(fe) > 0 {
			return nil, nil, fail(fe, err)
		}
	case decodeWarn:
		strictErrs, err := kjson.UnmarshalStrict(raw, obj)
		if err != nil {
			return nil, nil, hardDecodeError(raw, err, fail)
		}
		dropped = strictFieldErrors(strictErrs)
	default:
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, obj); err != nil {
			return nil, nil, hardDecodeError(raw, err, fail)
		}
	}
	return obj, dropped, nil
}

// hardDecodeError is an error that stopped decoding, located at its field where it can be.
func hardDecodeError(raw []byte, err error, fail func([]FieldError, error) error) error {
	if fe, ok := hardFieldError(raw, err); ok {
		return fail([]FieldError{fe}, nil)
	}
	return fail(nil, err)
}

func orUnset(s string) string {
	if s == "" {
		return "<unset>"
	}
	return s
}

// EncodeJSON serializes obj with apiVersion and kind set (from the scheme when obj lacks them;
// obj itself is not modified).
func EncodeJSON(obj runtime.Object) ([]byte, error) {
	if obj == nil {
		return nil, errors.New("nil object")
	}
	if obj.GetObjectKind().GroupVersionKind().Kind == "" {
		gvks, _, err := Scheme.ObjectKinds(obj)
		if err != nil {
			return nil, err
		}
		obj = obj.DeepCopyObject()
		obj.GetObjectKind().SetGroupVersionKind(preferredKind(gvks))
	}
	return json.Marshal(obj)
}

// preferredKind picks the served kind among a type's registrations (option types are registered
// in every group), else the first.
func preferredKind(gvks []schema.GroupVersionKind) schema.GroupVersionKind {
	for _, g := range gvks {
		if _, ok := ByGVK(g); ok {
			return g
		}
	}
	return gvks[0]
}

// EncodeYAML serializes obj as YAML with apiVersion and kind set.
func EncodeYAML(obj runtime.Object) ([]byte, error) {
	j, err := EncodeJSON(obj)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(j)
}
