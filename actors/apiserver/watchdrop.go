package apiserver

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/skiff-sh/skiff/bus/statelog"
)

// unblockWhenDropped ends the stream's writes once the log drops its watcher as too slow
// (its buffer stayed full): a client that stopped reading leaves the handler stuck in a write
// to its socket, holding the watch's buffers and connection. The write's deadline is moved
// to now, so the handler returns, the connection closes, and the client, once it reads
// again, resumes from the last revision it got, as after kube-apiserver's cacheWatcher ends
// an unresponsive watch. The returned func stops it; call it before the handler returns.
func unblockWhenDropped(w http.ResponseWriter, watcher *statelog.Watcher) (stop func()) {
	rc := http.NewResponseController(w)
	var mu sync.Mutex
	finished := false
	quit := make(chan struct{})
	go func() {
		select {
		case <-watcher.Done():
		case <-quit:
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !finished && errors.Is(watcher.Err(), statelog.ErrTooSlow) {
			_ = rc.SetWriteDeadline(time.Now())
		}
	}()
	return func() {
		mu.Lock()
		finished = true
		mu.Unlock()
		close(quit)
	}
}
