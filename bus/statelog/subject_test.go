package statelog

import (
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

func FuzzToken(f *testing.F) {
	for _, s := range []string{"web-1", "discovery.k8s.io", "web.v2", "*", ">", "a b", "\x00\x7f", "%41", "ünï", "_", "%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" {
			return
		}
		tok := encodeToken(s)
		for i := 0; i < len(tok); i++ {
			if c := tok[i]; !plainByte(c) && c != '%' {
				t.Fatalf("encode(%q) = %q has byte %q", s, tok, c)
			}
		}
		if !server.IsValidLiteralSubject("state.k." + tok) {
			t.Fatalf("encode(%q) = %q is not a literal subject token", s, tok)
		}
		back, err := decodeToken(tok)
		if err != nil || back != s {
			t.Fatalf("decode(encode(%q)) = %q, %v", s, back, err)
		}
		// Decoding accepts only canonical encodings, so the map is a bijection.
		if d, err := decodeToken(s); err == nil && encodeToken(d) != s {
			t.Fatalf("decode(%q) = %q re-encodes to %q", s, d, encodeToken(d))
		}
	})
}

func FuzzKeySubject(f *testing.F) {
	f.Add("core/pods/default/web-1")
	f.Add("discovery.k8s.io/endpointslices/ns/web.v2")
	f.Add("core/nodes/_/node-a")
	f.Fuzz(func(t *testing.T, key string) {
		subj, err := keySubject("state.k", key)
		if err != nil {
			if key != "" && !strings.HasPrefix(key, "/") && !strings.HasSuffix(key, "/") && !strings.Contains(key, "//") {
				t.Fatalf("valid key %q rejected", key)
			}
			return
		}
		if !server.IsValidLiteralSubject(subj) || strings.Count(subj, ".") != strings.Count(key, "/")+2 {
			t.Fatalf("key %q -> bad subject %q", key, subj)
		}
		back, err := subjectKey("state.k", subj)
		if err != nil || back != key {
			t.Fatalf("round trip %q -> %q -> %q, %v", key, subj, back, err)
		}
	})
}

func TestTokenExamples(t *testing.T) {
	for in, want := range map[string]string{
		"web-1":            "web-1",
		"discovery.k8s.io": "discovery%2Ek8s%2Eio",
		"a b":              "a%20b",
		"*":                "%2A",
		">":                "%3E",
		"%":                "%25",
	} {
		if got := encodeToken(in); got != want {
			t.Errorf("encode(%q) = %q, want %q", in, got, want)
		}
	}
	for _, bad := range []string{"", "%2e", "%41", "%4", "a.b", "%zz"} {
		if _, err := decodeToken(bad); err == nil {
			t.Errorf("decode(%q) accepted", bad)
		}
	}
}
