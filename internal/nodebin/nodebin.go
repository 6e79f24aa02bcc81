// Package nodebin makes the skiff binary carry what a node runs besides itself, as k3s's one
// binary does: the containerd daemon, its runc shim and the CNI plugins are entries of this
// binary, picked by the name it is started as. Install puts one symlink per entry in a
// directory that the agent puts first on PATH, where containerd looks for its shim and go-cni
// for its plugins.
package nodebin

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/skiff-sh/skiff/internal/cniplugins"
)

// envEntry keeps the entry across a re-exec through /proc/self/exe: the runc shim starts its
// long-lived copy that way, under the executable's own name rather than the entry's.
const envEntry = "SKIFF_ENTRY"

// entries maps each name the binary answers to onto its main function.
var entries = map[string]func() int{
	"containerd":              containerdMain,
	"containerd-shim-runc-v2": shimMain,
}

func init() {
	for name, main := range cniplugins.Entries {
		entries[name] = main
	}
}

// Run runs the entry this process was started as and exits with its status; for plain skiff
// it returns at once. main calls it first.
func Run() {
	name := filepath.Base(os.Args[0])
	entry, ok := entries[name]
	if !ok {
		name = os.Getenv(envEntry)
		if entry, ok = entries[name]; !ok {
			return
		}
	}
	if err := os.Setenv(envEntry, name); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
	os.Exit(entry())
}

// Names lists the entries, sorted.
func Names() []string {
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Install makes dir hold one symlink per entry to this executable, replacing what an earlier
// start left (`go run` builds to a new path when the source changes).
func Install(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locating this executable: %w", err)
	}
	return install(self, dir, Names())
}

func install(self, dir string, names []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, n := range names {
		link := filepath.Join(dir, n)
		if cur, err := os.Readlink(link); err == nil && cur == self {
			continue
		}
		tmp := link + ".new"
		_ = os.Remove(tmp)
		if err := os.Symlink(self, tmp); err != nil {
			return err
		}
		if err := os.Rename(tmp, link); err != nil {
			return err
		}
	}
	return nil
}

// Carry installs the entries into dir and puts dir first on this process's PATH, as k3s does
// with its data dir's bin: containerd started from there finds its shim there too. It
// returns dir made absolute, where the CNI plugins are. The process must call Run first
// thing in main, or the links start it as itself.
func Carry(dir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locating this executable: %w", err)
	}
	return CarryBinary(self, dir)
}

// CarryBinary is Carry with the links to exe, another skiff binary (tests use one built
// without the race detector, which would slow every daemon and shim).
func CarryBinary(exe, dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := install(exe, dir, Names()); err != nil {
		return "", fmt.Errorf("node binaries in %s: %w", dir, err)
	}
	path := os.Getenv("PATH")
	if path == dir || strings.HasPrefix(path, dir+string(os.PathListSeparator)) {
		return dir, nil
	}
	if path != "" {
		path = string(os.PathListSeparator) + path
	}
	return dir, os.Setenv("PATH", dir+path)
}
