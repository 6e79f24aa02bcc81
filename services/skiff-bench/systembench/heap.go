package systembench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// heapStats is the Go runtime's view of skiff up's memory right after a forced GC, from the
// MemStats lines of /debug/pprof/heap?debug=1: what RSS is made of.
type heapStats struct {
	live     uint64 // HeapAlloc after the GC: the live heap
	inuse    uint64 // HeapInuse: spans holding objects
	retained uint64 // HeapIdle - HeapReleased: free spans not yet returned to the OS
	stacks   uint64 // Stack in use
	sys      uint64 // Sys: everything the runtime obtained from the OS
}

// heap forces a GC in skiff up, reads its MemStats, and keeps its heap profile (in-use
// objects as of that GC) in dir as heap-<tag>.pb.gz when dir is set.
func (p *cpuProfiler) heap(ctx context.Context, tag, dir string) (heapStats, error) {
	text, err := p.get(ctx, "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return heapStats{}, err
	}
	hs, err := parseMemStats(text)
	if err != nil {
		return heapStats{}, err
	}
	if dir == "" {
		return hs, nil
	}
	prof, err := p.get(ctx, "/debug/pprof/heap")
	if err != nil {
		return heapStats{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return heapStats{}, err
	}
	return hs, os.WriteFile(filepath.Join(dir, "heap-"+tag+".pb.gz"), prof, 0o644)
}

func (p *cpuProfiler) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d: %s", path, resp.StatusCode, bytes.TrimSpace(body[:min(len(body), 512)]))
	}
	return body, nil
}

// parseMemStats reads the "# Name = value" lines the debug=1 heap profile ends with.
func parseMemStats(text []byte) (heapStats, error) {
	vals := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "# "), " = ")
		if !ok {
			continue
		}
		// "Stack = <in use> / <from the OS>"; the other lines hold one number.
		val, _, _ = strings.Cut(val, " / ")
		if n, err := strconv.ParseUint(val, 10, 64); err == nil {
			vals[name] = n
		}
	}
	for _, name := range []string{"HeapAlloc", "HeapInuse", "HeapIdle", "HeapReleased", "Stack", "Sys"} {
		if _, ok := vals[name]; !ok {
			return heapStats{}, fmt.Errorf("heap profile: no %s in its MemStats", name)
		}
	}
	return heapStats{
		live:     vals["HeapAlloc"],
		inuse:    vals["HeapInuse"],
		retained: vals["HeapIdle"] - vals["HeapReleased"],
		stacks:   vals["Stack"],
		sys:      vals["Sys"],
	}, nil
}
