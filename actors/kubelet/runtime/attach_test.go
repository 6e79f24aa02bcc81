package runtime

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// waitLog waits until the container's log holds want.
func waitLog(t *testing.T, c *Container, want string) {
	t.Helper()
	eventually(t, 15*time.Second, func() error {
		b, err := os.ReadFile(c.LogPath)
		if err != nil || !strings.Contains(string(b), want) {
			return fmt.Errorf("log %q (%v), want %q", b, err, want)
		}
		return nil
	})
}

func attachStdin(t *testing.T, f *fixture, c *Container) *Stdin {
	t.Helper()
	in, err := f.rt.AttachStdin(context.Background(), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// A stdin container reads what attached clients write, several at once and one after another,
// and keeps running as they leave.
func TestAttachStdinStaysOpenAcrossClients(t *testing.T) {
	f := env(t)
	sb := newPod(t, f, "stdin")
	c := start(t, f, sb, ContainerConfig{Args: []string{"-interactive"}, Stdin: true})
	waitLog(t, c, "tty=false size=none")

	first, second := attachStdin(t, f, c), attachStdin(t, f, c)
	if !first.EndsAttach() {
		t.Error("a client's end of input ends its attach without stdinOnce")
	}
	_, _ = io.WriteString(first, "from-first\n")
	_, _ = io.WriteString(second, "from-second\n")
	waitLog(t, c, "echo: from-first")
	waitLog(t, c, "echo: from-second")
	first.Detach()
	second.Detach()

	later := attachStdin(t, f, c)
	if _, err := io.WriteString(later, "from-later\n"); err != nil {
		t.Fatal(err)
	}
	waitLog(t, c, "echo: from-later")
	if _, st := findContainer(t, f.rt, c.ID); st.State != StateRunning || !st.Stdin || st.StdinOnce || st.TTY {
		t.Errorf("after its clients left: %+v", st)
	}

	// Deleting the task releases the FIFO: a client's next write fails instead of blocking.
	if err := f.rt.StopContainer(context.Background(), c.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(later, "gone\n"); err == nil {
		t.Error("writing to a deleted container's stdin: want an error")
	}
}

// stdinOnce: the first client's leaving is the process's EOF, and no client attaches after.
func TestAttachStdinOnceClosesAfterFirstClient(t *testing.T) {
	f := env(t)
	evs := f.rt.Events(t.Context())
	sb := newPod(t, f, "stdin-once")
	c := start(t, f, sb, ContainerConfig{Args: []string{"-interactive"}, Stdin: true, StdinOnce: true})
	waitLog(t, c, "tty=false")

	in := attachStdin(t, f, c)
	if in.EndsAttach() {
		t.Error("stdinOnce without a terminal: the output flows until the exit, as under the CRI")
	}
	_, _ = io.WriteString(in, "only-once\n")
	waitLog(t, c, "echo: only-once")
	in.Detach()
	// httpecho -interactive exits 0 at EOF.
	if ev := waitEvent(t, evs, c.ID, EventExit); ev.ExitCode != 0 {
		t.Errorf("exit after stdin closed: %+v", ev)
	}
	if _, err := f.rt.AttachStdin(t.Context(), c.ID); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("attaching after the first client left: %v, want stdin closed", err)
	}
}

func TestAttachStdinRefusedWithoutStdin(t *testing.T) {
	f := env(t)
	sb := newPod(t, f, "no-stdin")
	c := start(t, f, sb, ContainerConfig{})
	waitServing(t, sb)
	_, err := f.rt.AttachStdin(context.Background(), c.ID)
	if err == nil || !strings.Contains(err.Error(), "stdin: container \"web\" was created without stdin") {
		t.Errorf("attach stdin to a container without: %v", err)
	}
}

// A terminal container's output, echo included, reaches its log as one stream, and resizing
// its terminal is what the process sees.
func TestTerminalContainerLogsAndResizes(t *testing.T) {
	f := env(t)
	ctx := context.Background()
	sb := newPod(t, f, "terminal")
	c := start(t, f, sb, ContainerConfig{Args: []string{"-interactive"}, Stdin: true, StdinOnce: true, TTY: true})
	waitLog(t, c, "tty=true")

	if err := f.rt.ResizeTerminal(ctx, c.ID, TerminalSize{Width: 101, Height: 33}); err != nil {
		t.Fatal(err)
	}
	in := attachStdin(t, f, c)
	if !in.EndsAttach() {
		t.Error("with a terminal a client's end of input ends its attach")
	}
	_, _ = io.WriteString(in, "size\r")
	waitLog(t, c, "size=101x33")
	// The shim tears a terminal down with its input, so stdinOnce leaves it open (as the CRI).
	in.Detach()
	again := attachStdin(t, f, c)
	_, _ = io.WriteString(again, "still-here\r")
	waitLog(t, c, "echo: still-here")
	if _, st := findContainer(t, f.rt, c.ID); st.State != StateRunning || !st.TTY || !st.StdinOnce {
		t.Errorf("terminal container after a client left: %+v", st)
	}
}
