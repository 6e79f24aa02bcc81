package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// A write's response comes at the log's ack, before the server's view has applied it. What a
// client does next with the answer must still see it: GET and LIST (also LIST at
// resourceVersion=0, served from the view), a watch from the returned resourceVersion starts
// right after it, and an update pinned to it succeeds once while a stale one is a 409.
// Eight clients at once, so the view is always behind someone's write.
func TestReadYourWritesOverHTTP(t *testing.T) {
	_, hs, _ := newTestServer(t, statelog.Config{})
	const workers, per = 8, 12
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { errc <- readYourWrites(t, hs.URL, w, per) })
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Error(err)
		}
	}
}

func readYourWrites(t *testing.T, base string, w, per int) error {
	const path = "/api/v1/namespaces/default/configmaps"
	worker := fmt.Sprint(w)
	cm := func(name, rv string) string {
		meta := map[string]any{"name": name, "labels": map[string]string{"w": worker}}
		if rv != "" {
			meta["resourceVersion"] = rv
		}
		b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": map[string]string{"rv": rv}})
		return string(b)
	}
	want := func(code int, method, url, body string) (map[string]any, error) {
		got, out, err := do(method, url, body)
		if err == nil && got != code {
			err = fmt.Errorf("%s %s: %d, want %d: %v", method, url, got, code, out)
		}
		return out, err
	}
	list := base + path + "?labelSelector=w%3D" + worker
	for i := range per {
		name := fmt.Sprintf("w%d-%d", w, i)
		out, err := want(http.StatusCreated, "POST", base+path, cm(name, ""))
		if err != nil {
			return err
		}
		rv := rvOf(out)
		if out, err = want(http.StatusOK, "GET", base+path+"/"+name, ""); err != nil || rvOf(out) != rv {
			return fmt.Errorf("GET %s after its 201 at %s: resourceVersion %s, %v", name, rv, rvOf(out), err)
		}
		for _, url := range []string{list, list + "&resourceVersion=0"} {
			out, err := want(http.StatusOK, "GET", url, "")
			items, _ := out["items"].([]any)
			found := false
			for _, it := range items {
				found = found || rvOf(it.(map[string]any)) == rv
			}
			if err != nil || len(items) != i+1 || !found {
				return fmt.Errorf("LIST %s after creating %s at %s: %d items, %v", url, name, rv, len(items), err)
			}
		}
		if i%4 != 0 {
			continue
		}
		next, err := openWatch(t, list+"&watch=1&resourceVersion="+rv)
		if err != nil {
			return err
		}
		out, err = want(http.StatusOK, "PUT", base+path+"/"+name, cm(name, rv))
		if err != nil {
			return err
		}
		updated := rvOf(out)
		if _, err := want(http.StatusConflict, "PUT", base+path+"/"+name, cm(name, rv)); err != nil {
			return err
		}
		line, err := next()
		var ev struct {
			Type   string
			Object map[string]any
		}
		if err == nil {
			err = json.Unmarshal(line, &ev)
		}
		if err != nil || ev.Type != "MODIFIED" || rvOf(ev.Object) != updated {
			return fmt.Errorf("watch from %s: first event %s at %s, want MODIFIED at %s (%v)", rv, ev.Type, rvOf(ev.Object), updated, err)
		}
	}
	return nil
}

// onLatest answers from the view's copy only when the write took; everything else is decided
// again on a consistent read, and lost unconditional races retry a bounded number of times.
func TestOnLatestDecidesOnlyOnAConsistentRead(t *testing.T) {
	k, _ := schemas.ByResource("", "v1", "configmaps")
	var reads []bool
	refused := apierrors.NewBadRequest("refused")
	_, err := onLatest(k, "x", func(fresh bool) (runtime.Object, casOutcome, error) {
		reads = append(reads, fresh)
		return nil, casDecided, refused
	})
	if !errors.Is(err, refused) || fmt.Sprint(reads) != "[false true]" {
		t.Fatalf("a refusal: %v after reads %v, want it decided on the second, consistent read", err, reads)
	}
	reads = nil
	if _, err := onLatest(k, "x", func(fresh bool) (runtime.Object, casOutcome, error) {
		reads = append(reads, fresh)
		return nil, casWritten, nil
	}); err != nil || fmt.Sprint(reads) != "[false]" {
		t.Fatalf("a write: %v after reads %v, want one read of the view", err, reads)
	}
	reads = nil
	_, err = onLatest(k, "x", func(fresh bool) (runtime.Object, casOutcome, error) {
		reads = append(reads, fresh)
		return nil, casLostRace, nil
	})
	if !apierrors.IsConflict(err) || len(reads) != maxConflictRetries+1 || reads[0] || !reads[1] {
		t.Fatalf("lost races: %v after %d reads %v", err, len(reads), reads)
	}
}
