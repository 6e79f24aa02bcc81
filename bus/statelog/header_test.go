package statelog

import (
	"slices"
	"testing"

	"github.com/nats-io/nats.go"
)

func TestHeaderFromNATSKeepsOwnFieldsSorted(t *testing.T) {
	nh := nats.Header{}
	nh["tracestate"] = []string{"k=v"}
	nh["traceparent"] = []string{"00-abc-01"}
	nh["Nats-Expected-Last-Subject-Sequence"] = []string{"3"}
	nh[hdrOp] = []string{opDelete}
	h := fromNATSHeader(nh)
	want := Header{{"traceparent", "00-abc-01"}, {"tracestate", "k=v"}}
	if !slices.Equal(h, want) {
		t.Fatalf("got %v, want %v", h, want)
	}
	if h.Get("traceparent") != "00-abc-01" || h.Get("baggage") != "" {
		t.Fatalf("Get: %v", h)
	}
	if len(fromNATSHeader(nats.Header{hdrOp: {opDelete}})) != 0 {
		t.Fatal("a message with reserved headers only has a header")
	}
}

func TestHeaderRoundTripsThroughNATS(t *testing.T) {
	h := HeaderFrom(map[string]string{"traceparent": "00-abc-01", "baggage": "a=1", "Skiff-Op": "del"})
	nh := toNATSHeader(h)
	if nh.Get("Skiff-Op") != "" {
		t.Fatal("a reserved name was written")
	}
	want := Header{{"baggage", "a=1"}, {"traceparent", "00-abc-01"}}
	if got := fromNATSHeader(nh); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if HeaderFrom(nil) != nil {
		t.Fatal("an empty map makes a header")
	}
}
