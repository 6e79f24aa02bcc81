package main

import (
	"fmt"
	"os/exec"
	"path/filepath"

	"github.com/skiff-sh/skiff/internal/nodebin"
)

// runcInstall is how a Debian or Ubuntu machine gets runc, the one node part Skiff does not carry.
const runcInstall = "apt-get install -y runc"

// carryNodeBinaries links this binary's node entries (containerd, its runc shim, the CNI
// plugins) into DATA_DIR/bin, first on PATH; it returns that directory, where the agent's CNI
// plugins are.
func carryNodeBinaries(dataDir string) (string, error) {
	if _, err := exec.LookPath("runc"); err != nil {
		return "", fmt.Errorf("runc is not installed (the one part of a node skiff does not carry): %s", runcInstall)
	}
	return nodebin.Carry(filepath.Join(dataDir, "bin"))
}
