package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/skiff-sh/skiff/testkit/cgrouptest"
)

// loadClientEnv marks the test binary re-executed as a load client.
const loadClientEnv = "SKIFF_E2E_LOAD_CLIENT"

// loadReq asks the load client to start a load (GETs at Rate per second, each on a new
// connection, so each goes through the Service hook's connect()), report it, or stop it.
type loadReq struct {
	Op   string // start, count, stop
	URL  string
	Rate int
}

// loadResp counts the load's requests by outcome so far.
type loadResp struct {
	OK, Refused, Failed int
	Failures            []string // the first few, with their times
	Err                 string
}

type load struct {
	mu     sync.Mutex
	counts loadResp
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// serveLoad is the load client's main: one request per line of in.
func serveLoad(in io.Reader, out io.Writer) {
	l := &load{}
	cgrouptest.Serve(in, out, l.handle, func(err error) loadResp { return loadResp{Err: err.Error()} })
	l.stop()
}

func (l *load) handle(r loadReq) loadResp {
	switch r.Op {
	case "start":
		if l.cancel != nil || r.Rate <= 0 {
			return loadResp{Err: "a load runs already, or Rate is not positive"}
		}
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel = cancel
		l.wg.Add(1)
		go l.run(ctx, r)
	case "stop":
		l.stop()
	case "count":
	default:
		return loadResp{Err: "unknown op " + r.Op}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.counts
	c.Failures = append([]string(nil), c.Failures...)
	return c
}

func (l *load) stop() {
	if l.cancel != nil {
		l.cancel()
		l.wg.Wait()
	}
}

func (l *load) run(ctx context.Context, r loadReq) {
	defer l.wg.Done()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	t := time.NewTicker(time.Second / time.Duration(r.Rate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.wg.Add(1)
		go func() { // a slow answer must not lower the rate
			defer l.wg.Done()
			l.record(get(client, r.URL))
		}()
	}
}

func get(client *http.Client, url string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

func (l *load) record(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := &l.counts
	switch {
	case err == nil:
		c.OK++
		return
	case errors.Is(err, syscall.ECONNREFUSED):
		c.Refused++
	default:
		c.Failed++
	}
	if len(c.Failures) < 10 {
		c.Failures = append(c.Failures, time.Now().Format("15:04:05.000")+" "+err.Error())
	}
}
