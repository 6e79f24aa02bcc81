package systembench

import (
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"runtime"
	"testing"
)

// The MemStats the bench reads are those runtime/pprof writes today: a rename there must fail
// here, not in the middle of a system run.
func TestParseMemStatsOfPprof(t *testing.T) {
	rec := httptest.NewRecorder()
	pprof.Handler("heap").ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/heap?gc=1&debug=1", nil))
	hs, err := parseMemStats(rec.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if hs.live == 0 || hs.inuse < hs.live || hs.stacks == 0 || hs.sys < hs.inuse || hs.sys > ms.Sys*2 {
		t.Fatalf("implausible %+v (runtime now: Sys %d)", hs, ms.Sys)
	}
}

func TestParseMemStatsNamesWhatIsMissing(t *testing.T) {
	_, err := parseMemStats([]byte("# HeapAlloc = 1\n"))
	if err == nil {
		t.Fatal("no error for a profile without HeapInuse")
	}
}
