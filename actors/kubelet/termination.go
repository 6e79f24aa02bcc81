package kubelet

import (
	"io"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
)

// maxTerminationMessage is how much of a termination message is kept, as Kubernetes' kubelet.
const maxTerminationMessage = 4096

// terminationFile is where a container attempt's termination message lands on the host: next
// to that attempt's log, so the status finds it from the attempt's record alone (also after an
// agent restart).
func terminationFile(logPath string) string {
	if logPath == "" {
		return ""
	}
	return strings.TrimSuffix(logPath, ".log") + ".termination-log"
}

// terminationMount makes the empty message file of an attempt and binds it at the container's
// terminationMessagePath.
func (k *kubelet) terminationMount(sb *kruntime.Sandbox, c *corev1.Container, attempt int) ([]kruntime.Mount, error) {
	if c.TerminationMessagePath == "" {
		return nil, nil
	}
	path := terminationFile(k.rt.LogPath(sb.PodUID, c.Name, attempt))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o666)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o666); err != nil { // past the umask: a container of any user writes it
		f.Close()
		return nil, err
	}
	return []kruntime.Mount{{HostPath: path, ContainerPath: c.TerminationMessagePath}}, f.Close()
}

// terminationMessage is what an exited attempt left in its termination message file.
func terminationMessage(c *kruntime.ContainerStatus) string {
	f, err := os.Open(terminationFile(c.LogPath))
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxTerminationMessage))
	return string(b)
}
