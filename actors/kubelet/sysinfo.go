package kubelet

import (
	"bufio"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// hostInfo is what the node reports about its host, as the kubelet's cadvisor-fed node info does:
// kubectl get nodes -o wide shows OS-IMAGE and KERNEL-VERSION from it.
type hostInfo struct {
	osImage, kernelVersion, machineID, bootID string
}

func readHostInfo() hostInfo {
	return hostInfo{
		osImage:       osImage(readFile("/etc/os-release")),
		kernelVersion: kernelRelease(),
		machineID:     strings.TrimSpace(readFile("/etc/machine-id")),
		bootID:        strings.TrimSpace(readFile("/proc/sys/kernel/random/boot_id")),
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// osImage is os-release's PRETTY_NAME (the kubelet's source too), "Unknown" without one.
func osImage(osRelease string) string {
	sc := bufio.NewScanner(strings.NewReader(osRelease))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "PRETTY_NAME="); ok {
			if v = strings.Trim(v, `"'`); v != "" {
				return v
			}
		}
	}
	return "Unknown"
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
