package volumes

import (
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
)

// hostPath checks (and for the OrCreate types makes) the host path as its type asks, with
// Kubernetes' messages; no type (the default "") checks nothing.
func hostPath(h *corev1.HostPathVolumeSource) (Volume, error) {
	t := corev1.HostPathUnset
	if h.Type != nil {
		t = *h.Type
	}
	p := h.Path
	st, err := os.Stat(p)
	exists := err == nil
	is := func(what string, ok bool) error {
		if !exists || !ok {
			return fmt.Errorf("hostPath type check failed: %s is not a %s", p, what)
		}
		return nil
	}
	switch t {
	case corev1.HostPathUnset:
	case corev1.HostPathDirectoryOrCreate:
		if !exists {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return Volume{}, err
			}
			st, exists = statOK(p)
		}
		err = is("directory", exists && st.IsDir())
	case corev1.HostPathDirectory:
		err = is("directory", exists && st.IsDir())
	case corev1.HostPathFileOrCreate:
		if !exists {
			f, cerr := os.OpenFile(p, os.O_CREATE|os.O_EXCL, 0o644)
			if cerr != nil && !os.IsExist(cerr) {
				return Volume{}, fmt.Errorf("hostPath type check failed: create %s: %w", p, cerr)
			}
			if f != nil {
				_ = f.Close()
			}
			st, exists = statOK(p)
		}
		err = is("file", exists && st.Mode().IsRegular())
	case corev1.HostPathFile:
		err = is("file", exists && st.Mode().IsRegular())
	case corev1.HostPathSocket:
		err = is("socket file", exists && st.Mode()&os.ModeSocket != 0)
	case corev1.HostPathCharDev:
		err = is("character device", exists && st.Mode()&os.ModeCharDevice != 0)
	case corev1.HostPathBlockDev:
		err = is("block device", exists && st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0)
	default:
		err = fmt.Errorf("hostPath type %q is not supported", t)
	}
	if err != nil {
		return Volume{}, err
	}
	return Volume{Path: p}, nil
}

func statOK(p string) (os.FileInfo, bool) {
	st, err := os.Stat(p)
	return st, err == nil
}
