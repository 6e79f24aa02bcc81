package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A plain container's output written while no runtime copies it (between one runtime's Close
// and the next one's start, an agent restart) waits in its FIFO and reaches the log after.
func TestOutputWaitsForTheNextRuntime(t *testing.T) {
	outputAcrossRuntimes(t, "restart-plain", false)
}

// So does a terminal's, through its one output FIFO.
func TestTerminalOutputWaitsForTheNextRuntime(t *testing.T) {
	outputAcrossRuntimes(t, "restart-tty", true)
}

// outputAcrossRuntimes has a container answer its stdin while no runtime runs, then checks that
// the next runtime copies the answer, and what comes after, into the log as stdout records.
func outputAcrossRuntimes(t *testing.T, pod string, tty bool) {
	f := env(t)
	ctx := context.Background()
	first, err := New(ctx, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := first.RunSandbox(ctx, SandboxConfig{PodUID: "uid-" + pod + "-" + randHex(4), PodName: pod, PodNamespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.rt.StopSandbox(context.Background(), sb.PodUID) })
	c, err := first.StartContainer(ctx, sb, ContainerConfig{Name: "web", Image: testImage, Args: []string{"-interactive"}, Stdin: true, TTY: tty})
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, c, fmt.Sprintf("tty=%t", tty))
	for _, stream := range outputStreams(tty) {
		if size := fifoPipeSize(t, first.fifoPath(sb.PodUID, c.ID, stream)); size != pipeSize {
			t.Errorf("%s FIFO buffers %d bytes, want %d", stream, size, pipeSize)
		}
	}
	in, err := first.AttachStdin(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	eol := "\n"
	if tty {
		eol = "\r" // the terminal's line discipline ends a line at its carriage return
	}
	// The stdin's write end lives in this process still, so the process can be asked to speak.
	if _, err := io.WriteString(in, "while-down"+eol); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if b, _ := os.ReadFile(c.LogPath); strings.Contains(string(b), "echo: while-down") {
		t.Fatal("the output reached the log with no runtime copying it: the test proves nothing")
	}
	next, err := New(ctx, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	waitLog(t, c, " stdout F echo: while-down")
	// The resumed copy goes on with what the process writes next.
	if _, err := io.WriteString(in, "after"+eol); err != nil {
		t.Fatal(err)
	}
	waitLog(t, c, " stdout F echo: after")
}

// stdout and stderr are copied apart into one log, each line a record of its stream; deleting
// an exited container's task leaves the whole output in the log and no FIFO behind.
func TestLogKeepsStreamsApartAndDrainsBeforeDelete(t *testing.T) {
	f := env(t)
	sb := newPod(t, f, "streams")
	c := start(t, f, sb, ContainerConfig{Args: []string{"-cat", "/no/such/file"}})
	eventually(t, 15*time.Second, func() error {
		if _, st := findContainer(t, f.rt, c.ID); st.State != StateExited {
			return errors.New("still " + string(st.State))
		}
		return nil
	})
	if err := f.rt.StopContainer(context.Background(), c.ID, 0); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(c.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	record := regexp.MustCompile(`(?m)^\S+ stderr F .*/no/such/file.*$`)
	if !record.Match(b) || strings.Contains(string(b), " stdout ") {
		t.Errorf("log of a container that wrote only to stderr:\n%s", b)
	}
	for _, stream := range []string{"stdout", "stderr"} {
		if _, err := os.Stat(f.rt.fifoPath(sb.PodUID, c.ID, stream)); !os.IsNotExist(err) {
			t.Errorf("%s FIFO after the task went: %v", stream, err)
		}
	}
}

// fifoPipeSize is the buffer of the pipe behind a FIFO that the shim holds open.
func fifoPipeSize(t *testing.T, path string) int {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	size, err := unix.FcntlInt(uintptr(fd), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		t.Fatal(err)
	}
	return size
}
