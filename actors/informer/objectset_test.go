package informer

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// keys are the set's keys, each checked to hold the object named by it at version rv.
func keys(t *testing.T, s *objectSet, rv string) []string {
	t.Helper()
	var out []string
	s.each(func(k string, o runtime.Object) {
		if m := o.(*corev1.Pod).ObjectMeta; m.Name != k || m.ResourceVersion != rv {
			t.Fatalf("key %s holds %s at %s, want %s", k, m.Name, m.ResourceVersion, rv)
		}
		out = append(out, k)
	})
	slices.Sort(out)
	return out
}

func podAt(name, rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
}

// An object set holds each key once with its latest object, whether it is still a short
// slice or has become a map, and removing keys in any order leaves exactly the others.
func TestObjectSetAcrossItsTwoForms(t *testing.T) {
	for _, n := range []int{1, smallSet, smallSet + 5} {
		var s objectSet
		var want []string
		for i := range n {
			k := fmt.Sprintf("k%02d", i)
			s.put(k, podAt(k, "1"))
			s.put(k, podAt(k, "2")) // again: replaced, no duplicate
			want = append(want, k)
		}
		if got := keys(t, &s, "2"); !slices.Equal(got, want) || s.len() != n {
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
		if got := keys(t, &s, "2"); !slices.Equal(got, rest) || s.len() != len(rest) {
			t.Fatalf("%d keys less the even ones: got %v, want %v", n, got, rest)
		}
		for _, k := range rest {
			s.remove(k)
		}
		if s.len() != 0 || keys(t, &s, "2") != nil {
			t.Fatalf("%d keys all removed: %v", n, keys(t, &s, "2"))
		}
	}
}
