// Package nodebintest gives a test's node the containerd, runc shim and CNI plugins that skiff
// carries, from a skiff binary built without the race detector: the race-built test binary
// could serve as the multi-call binary too, but its daemon and shims run several times slower.
package nodebintest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"

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
