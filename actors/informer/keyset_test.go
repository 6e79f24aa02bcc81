package informer

import (
	"fmt"
	"slices"
	"testing"
)

func keys(s *keySet) []string {
	var out []string
	s.each(func(k string) { out = append(out, k) })
	slices.Sort(out)
	return out
}

// A key set holds each key once, whether it is still a short slice or has become a map, and
// removing keys in any order leaves exactly the others.
func TestKeySetAcrossItsTwoForms(t *testing.T) {
	for _, n := range []int{1, smallSet, smallSet + 5} {
		var s keySet
		var want []string
		for i := range n {
			k := fmt.Sprintf("k%02d", i)
			s.add(k)
			s.add(k) // again: no duplicate
			want = append(want, k)
		}
		if got := keys(&s); !slices.Equal(got, want) || s.len() != n {
			t.Fatalf("%d keys: got %v (len %d)", n, got, s.len())
		}
		if (s.many != nil) != (n > smallSet) {
			t.Fatalf("%d keys: map form %v", n, s.many != nil)
		}
		s.remove("absent")
		for i := 0; i < n; i += 2 { // every other one, then the rest
			s.remove(want[i])
		}
		var rest []string
		for i := 1; i < n; i += 2 {
			rest = append(rest, want[i])
		}
		if got := keys(&s); !slices.Equal(got, rest) || s.len() != len(rest) {
			t.Fatalf("%d keys less the even ones: got %v, want %v", n, got, rest)
		}
		for _, k := range rest {
			s.remove(k)
		}
		if s.len() != 0 || keys(&s) != nil {
			t.Fatalf("%d keys all removed: %v", n, keys(&s))
		}
	}
}
