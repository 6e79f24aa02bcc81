package crilog_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cri-client/pkg/logs"

	"github.com/skiff-sh/skiff/actors/kubelet/runtime/crilog"
)

var t0 = time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)

// clock returns t0, t0+1s, t0+2s... one tick per record written.
func clock() func() time.Time {
	var mu sync.Mutex
	next := t0
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now := next
		next = next.Add(time.Second)
		return now
	}
}

// writeLog writes the chunks in order, each as its stream, into a new log file.
func writeLog(t *testing.T, chunks ...[2]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "0.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := crilog.NewFile(f, clock())
	for _, c := range chunks {
		if err := w.Copy(c[0], strings.NewReader(c[1])); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func read(t *testing.T, path string, o corev1.PodLogOptions) string {
	t.Helper()
	l, err := crilog.Open(path, crilog.NewOptions(&o, t0.Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := l.Copy(context.Background(), exited, &out, &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func exited(context.Context) (bool, error) { return false, nil }

func ptr[T any](v T) *T { return &v }

func TestLongLinesArePartialRecordsAndReadBackWhole(t *testing.T) {
	long := strings.Repeat("x", 2*crilog.MaxLineSize+5)
	in := long + "\nshort\nno newline at the end"
	path := writeLog(t, [2]string{crilog.Stdout, in})
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, rec := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		f := strings.SplitN(rec, " ", 4)
		if len(f) != 4 || f[1] != "stdout" {
			t.Fatalf("record %.80q is not `<time> stdout <tag> <content>`", rec)
		}
		if _, err := time.Parse(time.RFC3339Nano, f[0]); err != nil {
			t.Fatalf("record time %q: %v", f[0], err)
		}
		if len(f[3]) > crilog.MaxLineSize {
			t.Fatalf("a record holds %d bytes, over %d", len(f[3]), crilog.MaxLineSize)
		}
		tags = append(tags, f[2])
	}
	if got := strings.Join(tags, ","); got != "P,P,F,F,P" {
		t.Fatalf("tags %s, want P,P,F (the long line), F (short), P (the end without a newline)", got)
	}
	if got := read(t, path, corev1.PodLogOptions{}); got != in {
		t.Fatalf("read back %d bytes, want the %d written", len(got), len(in))
	}
	// With timestamps, only the start of a line carries its time, as the kubelet shows it.
	got := read(t, path, corev1.PodLogOptions{Timestamps: true})
	if want := t0.Format(logs.RFC3339NanoFixed) + " " + long + "\n"; !strings.HasPrefix(got, want) {
		t.Fatalf("timestamped long line: %.60q...", got)
	}
}

func TestStreamsInterleaveInWriteOrder(t *testing.T) {
	path := writeLog(t, [2]string{crilog.Stdout, "out 1\n"}, [2]string{crilog.Stderr, "err 1\n"}, [2]string{crilog.Stdout, "out 2\n"})
	if got := read(t, path, corev1.PodLogOptions{}); got != "out 1\nerr 1\nout 2\n" {
		t.Fatalf("got %q", got)
	}
	l, err := crilog.Open(path, crilog.NewOptions(&corev1.PodLogOptions{}, t0))
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := l.Copy(context.Background(), exited, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "out 1\nout 2\n" || stderr.String() != "err 1\n" {
		t.Fatalf("split: stdout %q stderr %q", stdout.String(), stderr.String())
	}
}

// tenLines is a log of lines 0..9, line i written at t0+i s.
func tenLines(t *testing.T) string {
	var chunks [][2]string
	for i := range 10 {
		chunks = append(chunks, [2]string{crilog.Stdout, "line " + string(rune('0'+i)) + "\n"})
	}
	return writeLog(t, chunks...)
}

func TestSinceTimestampsTailAndLimit(t *testing.T) {
	path := tenLines(t)
	sinceTime := metav1.NewTime(t0.Add(7 * time.Second))
	now := t0.Add(time.Hour)
	for _, c := range []struct {
		name string
		opts corev1.PodLogOptions
		want string
	}{
		{"sinceTime", corev1.PodLogOptions{SinceTime: &sinceTime}, "line 7\nline 8\nline 9\n"},
		// sinceSeconds counts back from the request's time (an hour after t0 here).
		{"sinceSeconds", corev1.PodLogOptions{SinceSeconds: ptr(int64(3600 - 8))}, "line 8\nline 9\n"},
		{"sinceSeconds before everything", corev1.PodLogOptions{SinceSeconds: ptr(int64(7200))}, "line 0\nline 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8\nline 9\n"},
		{"tail", corev1.PodLogOptions{TailLines: ptr(int64(2))}, "line 8\nline 9\n"},
		// As the kubelet: the tail's lines first, then those before since dropped.
		{"tail with since", corev1.PodLogOptions{TailLines: ptr(int64(4)), SinceTime: &sinceTime}, "line 7\nline 8\nline 9\n"},
		{"limitBytes", corev1.PodLogOptions{LimitBytes: ptr(int64(10))}, "line 0\nlin"},
		{"timestamps", corev1.PodLogOptions{Timestamps: true, TailLines: ptr(int64(1))}, t0.Add(9*time.Second).Format(logs.RFC3339NanoFixed) + " line 9\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := crilog.Open(path, crilog.NewOptions(&c.opts, now))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := l.Copy(context.Background(), exited, &out, &out); err != nil {
				t.Fatal(err)
			}
			if out.String() != c.want {
				t.Fatalf("got %q, want %q", out.String(), c.want)
			}
		})
	}
}

func TestPlainLogFromBeforeServesAllButTimes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte("a\nb\nc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := read(t, path, corev1.PodLogOptions{}); got != "a\nb\nc\n" {
		t.Fatalf("whole: %q", got)
	}
	if got := read(t, path, corev1.PodLogOptions{TailLines: ptr(int64(2))}); got != "b\nc\n" {
		t.Fatalf("tail: %q", got)
	}
	if got := read(t, path, corev1.PodLogOptions{LimitBytes: ptr(int64(3))}); got != "a\nb" {
		t.Fatalf("limit: %q", got)
	}
	for _, o := range []corev1.PodLogOptions{{Timestamps: true}, {SinceSeconds: ptr(int64(5))}} {
		if _, err := crilog.Open(path, crilog.NewOptions(&o, t0)); !errors.Is(err, crilog.ErrNoTimes) {
			t.Fatalf("%+v on a plain log: %v, want ErrNoTimes", o, err)
		}
	}
}

func TestFollowEndsWhenTheContainerStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := crilog.NewFile(f, time.Now)
	if err := w.Copy(crilog.Stdout, strings.NewReader("before\n")); err != nil {
		t.Fatal(err)
	}
	l, err := crilog.Open(path, &logs.LogOptions{Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	var stopped atomic.Bool
	running := func(context.Context) (bool, error) { return !stopped.Load(), nil }
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := l.Copy(context.Background(), running, pw, pw)
		pw.Close()
		done <- err
	}()
	lines := bufio.NewReader(pr)
	readLine(t, lines, "before\n")
	if err := w.Copy(crilog.Stderr, strings.NewReader("after\n")); err != nil {
		t.Fatal(err)
	}
	readLine(t, lines, "after\n") // written after the follow began
	stopped.Store(true)
	if rest, err := io.ReadAll(lines); err != nil || len(rest) != 0 {
		t.Fatalf("after the stop: %q, %v", rest, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end after the container stopped")
	}
}

func readLine(t *testing.T, r *bufio.Reader, want string) {
	t.Helper()
	got := make(chan string, 1)
	go func() { line, _ := r.ReadString('\n'); got <- line }()
	select {
	case line := <-got:
		if line != want {
			t.Fatalf("followed %q, want %q", line, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no %q within 10s of following", want)
	}
}

// A terminal's prompt ends no line: CopyAsRead records it as soon as it is read, where Copy
// waits for the newline; kubectl logs reads the joined line either way.
func TestCopyAsReadRecordsAnOpenLineAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- crilog.NewFile(out, clock()).CopyAsRead(crilog.Stdout, pr) }()
	if _, err := io.WriteString(pw, "$ "); err != nil {
		t.Fatal(err)
	}
	want := "2026-12-05T01:00:00Z stdout P $ \n"
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if string(b) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the prompt's record: %q, want %q before the line ends", b, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, _ = io.WriteString(pw, "ls\nbin\n")
	_ = pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	l, err := crilog.Open(path, &logs.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Copy(context.Background(), func(context.Context) (bool, error) { return false, nil }, &got, &got); err != nil {
		t.Fatal(err)
	}
	if got.String() != "$ ls\nbin\n" {
		t.Fatalf("kubectl logs of it: %q, want the joined lines", got.String())
	}
}
