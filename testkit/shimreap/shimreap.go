// Package shimreap kills the containerd runc shims a test's containerd left behind. Shims
// outlive containerd by design (a node agent's pods survive its restart); a test's must not
// outlive the test binary, whatever its node's teardown missed.
package shimreap

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Kill kills the shims serving the containerd at socket.
func Kill(socket string) { kill(PIDs(socket)) }

// KillUnder kills the shims serving any containerd whose socket is under dir.
func KillUnder(dir string) {
	prefix := filepath.Clean(dir) + string(filepath.Separator)
	kill(matching(func(address string) bool { return strings.HasPrefix(address, prefix) }))
}

// PIDs are the shims serving the containerd at socket.
func PIDs(socket string) []int {
	return matching(func(address string) bool { return address == socket })
}

func kill(pids []int) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// matching are the shims whose containerd socket (their -address argument) serves accepts.
func matching(serves func(address string) bool) []int {
	var out []int
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		i := slices.Index(args, "-address")
		if i < 0 || i+1 >= len(args) || !serves(args[i+1]) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
			out = append(out, pid)
		}
	}
	return out
}
