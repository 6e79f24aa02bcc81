// Package nodebintest gives a test's node the containerd, runc shim and CNI plugins that skiff
// carries, from a skiff binary built without the race detector: the race-built test binary
// could serve as the multi-call binary too, but its daemon and shims run several times slower.
package nodebintest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/skiff-sh/skiff/actors/kubelet/runtime/crilog"
	"github.com/skiff-sh/skiff/internal/nodebin"
)

// Carry builds skiff into dir, links its node entries into dir/bin and puts that first on
// PATH (nodebin.CarryBinary); it returns dir/bin, the CNI plugin directory.
func Carry(dir string) (string, error) {
	exe := filepath.Join(dir, "skiff")
	cmd := exec.Command("go", "build", "-o", exe, "./services/skiff")
	_, file, _, _ := runtime.Caller(0)
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..") // the module root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build skiff: %v\n%s", err, out)
	}
	return nodebin.CarryBinary(exe, filepath.Join(dir, "bin"))
}

// CarryLogger links this process's own executable as the container logger
// (crilog.LoggerName) into dir, first on PATH, for a fixture on the host's containerd: the
// shim starts the logger by that name, so the process must call nodebin.Run first thing (a
// test package's TestMain). It saves building skiff where only the logger is needed.
func CarryLogger(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	_, err = nodebin.CarryEntries(self, dir, crilog.LoggerName)
	return err
}
