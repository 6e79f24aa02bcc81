package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/internal/pki"
)

// natsURLName is the file in a `skiff up` data dir naming its embedded NATS's client URL, so
// tools addressed at that instance (skiff sim nodes) reach its NATS without being told.
const natsURLName = "nats-url"

const defaultNATSURL = "nats://127.0.0.1:4222"

func writeNATSURL(dataDir, url string) error {
	return pki.WriteFileAtomic(filepath.Join(dataDir, natsURLName), []byte(url+"\n"), 0o644)
}

// instanceDataDir is the data dir of the instance a command addresses: --data-dir when given,
// else the directory of the kubeconfig in use when `skiff up` wrote it there, else the default.
func instanceDataDir(flag string, flagSet bool, kubeconfig string) string {
	if flagSet {
		return flag
	}
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	if dir := filepath.Dir(kubeconfig); kubeconfig != "" && isInstanceDir(dir) {
		return dir
	}
	return flag
}

func isInstanceDir(dir string) bool {
	for _, name := range []string{natsURLName, controlplane.NATSKeysDir} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

// instanceNATSURL is --nats-url when given, else the URL the instance in dataDir recorded.
func instanceNATSURL(flag string, flagSet bool, dataDir string) string {
	if flagSet {
		return flag
	}
	if b, err := os.ReadFile(filepath.Join(dataDir, natsURLName)); err == nil {
		if u := strings.TrimSpace(string(b)); u != "" {
			return u
		}
	}
	return flag
}
