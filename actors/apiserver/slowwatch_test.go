package apiserver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

// rvSet records the resourceVersions an informer delivered; all is closed once it has
// every one of wanted.
type rvSet struct {
	mu     sync.Mutex
	seen   map[string]bool
	wanted map[string]bool
	all    chan struct{}
	once   sync.Once
}

func (s *rvSet) add(o any) {
	cm, ok := o.(*corev1.ConfigMap)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[cm.ResourceVersion] = true
	s.check()
}

// expect sets what the informer must have seen.
func (s *rvSet) expect(rvs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rv := range rvs {
		s.wanted[rv] = true
	}
	s.check()
}

func (s *rvSet) check() {
	if len(s.wanted) == 0 {
		return
	}
	for rv := range s.wanted {
		if !s.seen[rv] {
			return
		}
	}
	s.once.Do(func() { close(s.all) })
}

// writeUpdates updates the config maps round-robin n times and returns the write rate and the
// revisions written.
func writeUpdates(t *testing.T, ctx context.Context, cms []*corev1.ConfigMap, update func(*corev1.ConfigMap) (*corev1.ConfigMap, error), n int) (float64, []string) {
	t.Helper()
	rvs := make([]string, 0, n)
	start := time.Now()
	for i := range n {
		cm := cms[i%len(cms)]
		cm.Data["n"] = fmt.Sprint(i)
		got, err := update(cm)
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		cms[i%len(cms)] = got
		rvs = append(rvs, got.ResourceVersion)
	}
	return float64(n) / time.Since(start).Seconds(), rvs
}

// liveHeapBytes is what is still held after a GC: the least of three samples, since the
// in-process control plane allocates between them (timers, bookmarks, lease renewals).
func liveHeapBytes() uint64 {
	least := uint64(math.MaxUint64)
	for range 3 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		least = min(least, m.HeapAlloc)
	}
	return least
}

// registeredWatchers is how many watchers the in-process logs hand events to.
func registeredWatchers(t *testing.T) float64 {
	return testutil.Metric(t, "skiff_statelog_watchers", nil)
}

// stalledWatch opens a watch over a socket with a 4 KiB receive buffer that is never read.
func stalledWatch(t *testing.T, host, path string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host); err != nil {
		t.Fatal(err)
	}
	return c
}

// Watchers that never read are dropped once their buffer stays full (kube-apiserver's
// cacheWatcher does the same): the server lets go of them, writes keep their rate, and an
// informer that reads sees every change.
func TestWatchersThatNeverReadAreDropped(t *testing.T) {
	const (
		keys       = 50
		baseWrites = 500
		writes     = 2500    // more than a watcher's buffer (1024 events) plus what its socket holds
		stalled    = 50      // watchers that never read
		valueLen   = 4 << 10 // bytes per object
	)
	cp := testutil.StartControlPlane(t, apiOnly)
	cs := newClientset(t, cp.URL())
	client := cs.CoreV1().ConfigMaps("default")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cms := make([]*corev1.ConfigMap, keys)
	for i := range cms {
		cm, err := client.Create(ctx, configMap(fmt.Sprintf("cm-%d", i), strings.Repeat("x", valueLen)), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cms[i] = cm
	}
	seen := &rvSet{seen: map[string]bool{}, wanted: map[string]bool{}, all: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	inf := factory.Core().V1().ConfigMaps().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen.add, UpdateFunc: func(_, o any) { seen.add(o) }})
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer never synced")
	}
	update := func(cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
		return client.Update(ctx, cm, metav1.UpdateOptions{})
	}

	goroutines0 := runtime.NumGoroutine()
	watchers0 := registeredWatchers(t)
	baseRate, rvs := writeUpdates(t, ctx, cms, update, baseWrites)

	u, err := url.Parse(cp.URL())
	if err != nil {
		t.Fatal(err)
	}
	path := "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=" + rvs[len(rvs)-1]
	conns := make([]net.Conn, stalled)
	for i := range conns {
		conns[i] = stalledWatch(t, u.Host, path)
	}
	fillRate, more := writeUpdates(t, ctx, cms, update, writes)
	rvs = append(rvs, more...)
	// The server let go of the stalled watches while their clients still do not read: the log
	// no longer hands them events, and their handlers returned, so no goroutine per stalled
	// watch is left.
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		if n := registeredWatchers(t); n > watchers0 {
			return fmt.Errorf("%.0f watchers registered, %.0f before the stalled ones", n, watchers0)
		}
		if g := runtime.NumGoroutine(); g > goroutines0+stalled/5 {
			return fmt.Errorf("%d goroutines, %d before the stalled watchers", g, goroutines0)
		}
		return nil
	})
	stalledRate, more := writeUpdates(t, ctx, cms, update, baseWrites)
	rvs = append(rvs, more...)
	heapStalled := liveHeapBytes()

	// Each stalled watch ended before all its events: read now, its stream stops short (the
	// connection was closed under it) long before the watch's timeout.
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("stalled watch %d: %v", i, err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("stalled watch %d still open after %d bytes", i, n)
		}
		if full := int64(writes * valueLen); n >= full {
			t.Fatalf("stalled watch %d got %d bytes, all %d of the stream", i, n, full)
		}
		c.Close()
	}
	heapClosed := liveHeapBytes()
	// The heap is logged, not asserted: the control plane's own allocations move it by
	// megabytes under a loaded machine, more than dropped watchers could hold.
	t.Logf("writes/s: %.0f before, %.0f while %d watchers that never read filled up, %.0f once they were dropped; heap %d MB with them stalled, %d MB once closed",
		baseRate, fillRate, stalled, stalledRate, heapStalled>>20, heapClosed>>20)
	// Writes that waited on watchers that never read would stall; a loaded machine moves the
	// rate by up to half on its own.
	if stalledRate < baseRate/4 {
		t.Errorf("writes slowed from %.0f/s to %.0f/s beside watchers that never read", baseRate, stalledRate)
	}
	seen.expect(rvs)
	select {
	case <-seen.all:
	case <-ctx.Done():
		seen.mu.Lock()
		missing := 0
		for rv := range seen.wanted {
			if !seen.seen[rv] {
				missing++
			}
		}
		seen.mu.Unlock()
		t.Fatalf("the informer did not see %d of %d changes", missing, len(seen.wanted))
	}
}
