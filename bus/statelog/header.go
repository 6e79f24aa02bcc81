package statelog

import (
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
)

// Header travels with each write as NATS message headers (W3C traceparent etc.). Names
// starting with "Nats-" or "Skiff-" are reserved.
//
// It is a slice, not a map: a view keeps one per live key and per event of its history, and
// a one-entry map costs ~400 bytes where the slice costs its strings and 32 bytes a field
// (about 16 MB at 10,000 pods and 5,000 nodes).
type Header []HeaderField

// HeaderField is one header.
type HeaderField struct{ Name, Value string }

// HeaderFrom is m as a Header, sorted by name.
func HeaderFrom(m map[string]string) Header {
	if len(m) == 0 {
		return nil
	}
	h := make(Header, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		h = append(h, HeaderField{k, m[k]})
	}
	return h
}

// Get is the value of name, "" if absent.
func (h Header) Get(name string) string {
	for _, f := range h {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// Names lists the header names.
func (h Header) Names() []string {
	names := make([]string, len(h))
	for i, f := range h {
		names[i] = f.Name
	}
	return names
}

func toNATSHeader(h Header) nats.Header {
	nh := make(nats.Header, len(h)+1)
	for _, f := range h {
		if reservedHeader(f.Name) {
			continue
		}
		nh[f.Name] = []string{f.Value}
	}
	return nh
}

func fromNATSHeader(nh nats.Header) Header {
	var h Header
	for k, vs := range nh {
		if reservedHeader(k) || len(vs) == 0 {
			continue
		}
		h = append(h, HeaderField{commonName(k), vs[0]})
	}
	if len(h) > 1 {
		slices.SortFunc(h, func(a, b HeaderField) int { return strings.Compare(a.Name, b.Name) })
	}
	return slices.Clip(h)
}

// commonName is the one copy of a header name every write carries, so the view does not keep
// the copy the NATS client allocated for each message.
func commonName(k string) string {
	for _, c := range [...]string{"traceparent", "tracestate", "baggage"} {
		if k == c {
			return c
		}
	}
	return k
}

func reservedHeader(k string) bool {
	return len(k) >= 5 && (strings.EqualFold(k[:5], "Nats-") || len(k) >= 6 && strings.EqualFold(k[:6], "Skiff-"))
}
