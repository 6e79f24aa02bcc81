package crilog

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"time"

	"k8s.io/cri-client/pkg/logs"
)

// plainPoll is how often a followed plain log looks for more output.
const plainPoll = 250 * time.Millisecond

// plainTailWindow bounds how far back from the end a plain log's tail looks for its lines.
const plainTailWindow = 1 << 20

// errLimitReached ends a copy whose byte limit was written.
var errLimitReached = errors.New("byte limit reached")

// copyPlain serves a log from before the CRI format: its bytes as they are, the last lines
// of its last MiB for a tail, up to a byte limit, following while the container runs.
func copyPlain(ctx context.Context, path string, opts *logs.LogOptions, running Running, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if opts.TailLines != nil {
		start, err := plainTailStart(f, *opts.TailLines)
		if err != nil {
			return err
		}
		if _, err := f.Seek(start, io.SeekStart); err != nil {
			return err
		}
	}
	if opts.LimitBytes != nil {
		out = &limitWriter{w: out, left: *opts.LimitBytes}
	}
	for {
		_, err := io.Copy(out, f)
		if errors.Is(err, errLimitReached) {
			return nil
		}
		if err != nil || !opts.Follow {
			return err
		}
		ok, err := running(ctx)
		if err != nil {
			return err
		}
		if !ok {
			_, err := io.Copy(out, f) // what it wrote before it stopped
			if errors.Is(err, errLimitReached) {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(plainPoll):
		}
	}
}

// plainTailStart is where the last n lines of f begin, looking back at most plainTailWindow;
// a last line without its newline counts as one.
func plainTailStart(f *os.File, n int64) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return st.Size(), nil
	}
	start := max(0, st.Size()-plainTailWindow)
	window := make([]byte, st.Size()-start)
	if _, err := f.ReadAt(window, start); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	trimmed := bytes.TrimSuffix(window, []byte("\n"))
	for i := len(trimmed) - 1; i >= 0; i-- {
		if trimmed[i] == '\n' {
			if n--; n == 0 {
				return start + int64(i) + 1, nil
			}
		}
	}
	return start, nil
}

// limitWriter writes up to left bytes, then reports errLimitReached.
type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errLimitReached
	}
	cut := p
	if int64(len(cut)) > l.left {
		cut = cut[:l.left]
	}
	n, err := l.w.Write(cut)
	l.left -= int64(n)
	if err == nil && n < len(p) {
		err = errLimitReached
	}
	return n, err
}
