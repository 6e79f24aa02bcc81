package resolvconf

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	c := Parse([]byte("# generated\nnameserver 10.0.0.2\nnameserver  127.0.0.53 ; stub\ndomain old.example\nsearch a.example b.example\noptions ndots:2\noptions edns0 trust-ad\n\nbogus line\nnameserver\n"))
	want := Config{Nameservers: []string{"10.0.0.2", "127.0.0.53"}, Searches: []string{"a.example", "b.example"}, Options: []string{"ndots:2", "edns0", "trust-ad"}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v, want %+v", c, want)
	}
	if got := Parse([]byte(c.String())); !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip %+v", got)
	}
}

func TestNonLoopback(t *testing.T) {
	got := NonLoopback([]string{"127.0.0.53", "::1", "10.0.0.2", "0.0.0.0", "not-an-ip", "fd00::1"})
	if !reflect.DeepEqual(got, []string{"10.0.0.2", "fd00::1"}) {
		t.Fatalf("%v", got)
	}
}

func TestReadMissingIsEmpty(t *testing.T) {
	c, err := Read(filepath.Join(t.TempDir(), "none"))
	if err != nil || len(c.Nameservers)+len(c.Searches)+len(c.Options) != 0 {
		t.Fatalf("%+v %v", c, err)
	}
	p := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(p, []byte("nameserver 192.0.2.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := Host(p); err != nil || !reflect.DeepEqual(c.Nameservers, []string{"192.0.2.1"}) {
		t.Fatalf("%+v %v", c, err)
	}
}

// Whatever a host's file holds, parsing does not panic, and what it renders parses back to the
// same configuration (the kubelet writes pods' files with String).
func FuzzParse(f *testing.F) {
	for _, s := range []string{"nameserver 10.0.0.1\nsearch a b\noptions ndots:5\n", "domain x\n#c\n;d\n", "options\nsearch\n", "nameserver\t1.2.3.4 extra\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := Parse(data)
		for _, v := range append(append(append([]string(nil), c.Nameservers...), c.Searches...), c.Options...) {
			if v == "" || strings.ContainsAny(v, " \t\n#;") {
				t.Fatalf("field %q from %q", v, data)
			}
		}
		again := Parse([]byte(c.String()))
		if len(c.Searches) == 0 {
			again.Searches = c.Searches // "search" with no names renders as nothing
		}
		if !reflect.DeepEqual(normal(again), normal(c)) {
			t.Fatalf("%+v -> %q -> %+v", c, c.String(), again)
		}
	})
}

func normal(c Config) Config {
	for _, p := range []*[]string{&c.Nameservers, &c.Searches, &c.Options} {
		if len(*p) == 0 {
			*p = nil
		}
	}
	return c
}
