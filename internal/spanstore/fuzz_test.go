package spanstore

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/protobuf/proto"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// The OTLP receiver takes bodies from other processes: any body is answered 200 or 4xx, and
// whatever it stored can be drawn.
func FuzzOTLPReceiver(f *testing.F) {
	seed, _ := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{
			{TraceId: bytes.Repeat([]byte{1}, 16), SpanId: bytes.Repeat([]byte{2}, 8), Name: "root", StartTimeUnixNano: 10, EndTimeUnixNano: 5},
			{TraceId: bytes.Repeat([]byte{1}, 16), SpanId: bytes.Repeat([]byte{3}, 8), ParentSpanId: bytes.Repeat([]byte{2}, 8), Name: "child"},
		}}},
	}}})
	f.Add(seed)
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, body []byte) {
		st := New(Options{MaxTraces: 4, MaxSpans: 64})
		r := httptest.NewRequest(http.MethodPost, OTLPPath, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/x-protobuf")
		w := httptest.NewRecorder()
		st.OTLPHandler().ServeHTTP(w, r)
		if w.Code != http.StatusOK && (w.Code < 400 || w.Code >= 500) {
			t.Fatalf("answered %d", w.Code)
		}
		var req coltracepb.ExportTraceServiceRequest
		if proto.Unmarshal(body, &req) != nil {
			return
		}
		for _, s := range FromOTLP(&req) {
			if err := Render(io.Discard, st.Trace(s.TraceID), 40); err != nil {
				t.Fatalf("render: %v", err)
			}
		}
	})
}
