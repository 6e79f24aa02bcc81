package crilog_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
	"time"

	"k8s.io/cri-client/pkg/logs"

	"github.com/skiff-sh/skiff/actors/kubelet/runtime/crilog"
)

// FuzzRecords: any output written as records reads back byte for byte, however the pipe
// delivered it; and any file, records or not, is read or refused without a panic.
func FuzzRecords(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), []byte("2016-10-06T00:17:09.669794202Z stdout P log content 1\n"), true)
	f.Add([]byte("no newline"), []byte("2016-10-06T00:17:09.669794203Z stderr F:x log\n2016-10-06T00:17:09Z stdout P\n"), false)
	f.Add(bytes.Repeat([]byte("ab\r"), crilog.MaxLineSize), []byte("plain text\n"), true)
	f.Fuzz(func(t *testing.T, output, file []byte, timestamps bool) {
		dir := t.TempDir()
		path := filepath.Join(dir, "0.log")
		out, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w := crilog.NewFile(out, time.Now)
		if err := w.Copy(crilog.Stdout, iotest.HalfReader(bytes.NewReader(output))); err != nil {
			t.Fatal(err)
		}
		out.Close()
		if got := readAll(t, path, &logs.LogOptions{}); !bytes.Equal(got, output) {
			t.Fatalf("read back %q, wrote %q", got, output)
		}

		arbitrary := filepath.Join(dir, "1.log")
		if err := os.WriteFile(arbitrary, file, 0o600); err != nil {
			t.Fatal(err)
		}
		crilog.IsRecord(file)
		if l, err := crilog.Open(arbitrary, &logs.LogOptions{Timestamp: timestamps}); err == nil {
			var sink bytes.Buffer
			_ = l.Copy(context.Background(), exitedState, &sink, &sink)
		}
	})
}

func exitedState(context.Context) (bool, error) { return false, nil }

func readAll(t *testing.T, path string, opts *logs.LogOptions) []byte {
	t.Helper()
	l, err := crilog.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := l.Copy(context.Background(), exitedState, &b, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
