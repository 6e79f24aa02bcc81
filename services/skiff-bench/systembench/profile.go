package systembench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
)

// profileChunk is the length of each CPU profile fetched: the API's pprof endpoint profiles
// for whole seconds only, so a window of unknown length is covered by back-to-back chunks
// (merged by pprof), overshooting its end by less than one chunk.
const profileChunk = "1"

// cpuProfiler fetches CPU profiles of a process from its /debug/pprof/profile (skiff up's on
// its API, the simulated nodes' on --pprof-listen) while a measured window is open.
type cpuProfiler struct {
	client *http.Client
	url    string
	dir    string
	prefix string // of the chunks' file names: <prefix>-<tag>-<n>.pb.gz
	profiles
}

// profiles are one process's CPU profile files, merged when printed.
type profiles struct {
	title string // whose, e.g. "skiff up"

	mu    sync.Mutex
	files []string
	err   error
}

func (p *profiles) add(path string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.err = err
		return
	}
	p.files = append(p.files, path)
}

// window profiles until the returned function is called; that function waits for the last
// chunk.
func (p *cpuProfiler) window(ctx context.Context, tag string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			// The chunk itself runs to its end even when the window closes meanwhile.
			path := filepath.Join(p.dir, fmt.Sprintf("%s-%s-%03d.pb.gz", p.prefix, tag, i))
			err := p.fetch(context.WithoutCancel(ctx), path)
			p.add(path, err)
			if err != nil {
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

func (p *cpuProfiler) fetch(ctx context.Context, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/debug/pprof/profile?seconds="+profileChunk, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("CPU profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("CPU profile: HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeTop prints `go tool pprof -top` of every file merged, sorted by cumulative and by flat
// time, and keeps the files in keep (if set).
func (p *profiles) writeTop(w io.Writer, nodes int, keep string) error {
	p.mu.Lock()
	files, err := p.files, p.err
	p.mu.Unlock()
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no CPU profile of %s was taken", p.title)
	}
	if keep != "" {
		if err := keepFiles(files, keep); err != nil {
			return err
		}
	}
	for _, sort := range []string{"-cum", "-flat"} {
		args := append([]string{"tool", "pprof", "-top", sort, fmt.Sprintf("-nodecount=%d", nodes)}, files...)
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go tool pprof: %w\n%s", err, out)
		}
		fmt.Fprintf(w, "\nCPU profile of %s over the measured windows, top %d by %s:\n%s", p.title, nodes, sort[1:], dropHeader(out))
	}
	return nil
}

// dropHeader leaves out pprof's lines naming the binary, build and date.
func dropHeader(out []byte) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(string(out), "\n") {
		if !strings.HasPrefix(line, "File: ") && !strings.HasPrefix(line, "Build ID: ") && !strings.HasPrefix(line, "Time: ") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func keepFiles(files []string, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// selfProfiler profiles the bench's own process (its client-go watches) with runtime/pprof,
// one file per measured window.
type selfProfiler struct {
	dir string
	profiles
}

func (p *selfProfiler) window(tag string) (stop func()) {
	path := filepath.Join(p.dir, fmt.Sprintf("bench-cpu-%s.pb.gz", tag))
	f, err := os.Create(path)
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		p.add(path, fmt.Errorf("CPU profile of the bench: %w", err))
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		p.add(path, f.Close())
	}
}
