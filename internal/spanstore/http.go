package spanstore

import (
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TracePath is where the apiserver serves the store to the CLI.
const TracePath = "/debug/traces"

// OTLPPath is the standard OTLP/HTTP traces path.
const OTLPPath = "/v1/traces"

// maxOTLPBody bounds one OTLP export request.
const maxOTLPBody = 16 << 20

// Result is the answer of GET /debug/traces.
type Result struct {
	TraceID string `json:"traceID"`
	Spans   []Span `json:"spans"`
}

// Handler serves one trace as JSON: ?trace=<id>, ?object=<resource>/<namespace>/<name> (or
// <resource>/<name> when cluster-scoped; the latest trace that touched it) or ?last=apply.
func (st *Store) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			httpError(w, http.StatusMethodNotAllowed, "only GET is served here")
			return
		}
		q := r.URL.Query()
		var id string
		switch {
		case q.Get("trace") != "":
			id = strings.ToLower(q.Get("trace"))
		case q.Get("object") != "":
			parts := strings.Split(q.Get("object"), "/")
			switch len(parts) {
			case 2:
				id = st.ForObject(parts[0], "", parts[1])
			case 3:
				id = st.ForObject(parts[0], parts[1], parts[2])
			default:
				httpError(w, http.StatusBadRequest, "object: want resource/namespace/name or resource/name, got %q", q.Get("object"))
				return
			}
		case q.Get("last") == "apply":
			id = st.LastApply()
		case q.Has("last"):
			httpError(w, http.StatusBadRequest, "last: only \"apply\" is supported, got %q", q.Get("last"))
			return
		default:
			httpError(w, http.StatusBadRequest, "one of the parameters trace, object or last is required")
			return
		}
		spans := st.Trace(id)
		if len(spans) == 0 {
			httpError(w, http.StatusNotFound, "no recent trace found (the store keeps the last %d traces)", st.opts.MaxTraces)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Result{TraceID: id, Spans: spans})
	})
}

// httpError answers with a Kubernetes Status, so API clients show the message.
func httpError(w http.ResponseWriter, code int, format string, args ...any) {
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Message: fmt.Sprintf(format, args...), Reason: metav1.StatusReason(strings.ReplaceAll(http.StatusText(code), " ", "")), Code: int32(code)}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(st)
}

// OTLPHandler receives OTLP/HTTP protobuf exports (POST /v1/traces) from other processes (node
// agents, the CLI) into the store.
func (st *Store) OTLPHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			httpError(w, http.StatusMethodNotAllowed, "only POST is served here")
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			httpError(w, http.StatusUnsupportedMediaType, "Content-Type: only application/x-protobuf is accepted, got %q", ct)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(r.Body)
			if err != nil {
				httpError(w, http.StatusBadRequest, "Content-Encoding: bad gzip body: %v", err)
				return
			}
			defer gz.Close()
			body = gz
		}
		data, err := io.ReadAll(io.LimitReader(body, maxOTLPBody+1))
		if err != nil {
			httpError(w, http.StatusBadRequest, "reading body: %v", err)
			return
		}
		if len(data) > maxOTLPBody {
			httpError(w, http.StatusRequestEntityTooLarge, "body: larger than %d bytes", maxOTLPBody)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			httpError(w, http.StatusBadRequest, "body: not an OTLP ExportTraceServiceRequest: %v", err)
			return
		}
		st.ingest(FromOTLP(&req))
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})
}

// FromOTLP converts the spans of an OTLP export.
func FromOTLP(req *coltracepb.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = anyString(kv.GetValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					TraceID:  hex.EncodeToString(s.GetTraceId()),
					SpanID:   hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()),
					Name:     s.GetName(),
					Service:  service,
					Scope:    ss.GetScope().GetName(),
					Kind:     kindName(s.GetKind()),
					Start:    time.Unix(0, int64(s.GetStartTimeUnixNano())),
					End:      time.Unix(0, int64(s.GetEndTimeUnixNano())),
				}
				if s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
					sp.Error = s.GetStatus().GetMessage()
					if sp.Error == "" {
						sp.Error = "error"
					}
				}
				if len(s.GetAttributes()) > 0 {
					sp.Attributes = make(map[string]string, len(s.GetAttributes()))
					for _, kv := range s.GetAttributes() {
						sp.Attributes[kv.GetKey()] = anyString(kv.GetValue())
					}
				}
				out = append(out, sp)
			}
		}
	}
	return out
}

// kindName matches the SDK's SpanKind.String ("server", "client", ...).
func kindName(k tracepb.Span_SpanKind) string {
	switch k {
	case tracepb.Span_SPAN_KIND_INTERNAL:
		return "internal"
	case tracepb.Span_SPAN_KIND_SERVER:
		return "server"
	case tracepb.Span_SPAN_KIND_CLIENT:
		return "client"
	case tracepb.Span_SPAN_KIND_PRODUCER:
		return "producer"
	case tracepb.Span_SPAN_KIND_CONSUMER:
		return "consumer"
	}
	return "unspecified"
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_BytesValue:
		return hex.EncodeToString(x.BytesValue)
	case nil:
		return ""
	}
	return v.String()
}
