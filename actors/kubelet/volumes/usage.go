package volumes

import (
	"io/fs"
	"path/filepath"
	"syscall"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Overuse is an emptyDir over its sizeLimit.
type Overuse struct {
	Volume      string
	Limit, Used resource.Quantity
}

// Message is Kubernetes' eviction message for it.
func (o Overuse) Message() string {
	return "Usage of EmptyDir volume \"" + o.Volume + "\" exceeds the limit \"" + o.Limit.String() + "\". "
}

// Overused returns the first disk-backed emptyDir whose usage (blocks allocated, as du counts
// them) exceeds its sizeLimit; a memory-backed one is a tmpfs of that size and cannot.
func (vs Volumes) Overused() (Overuse, bool) {
	for name, v := range vs {
		if v.limit == nil || v.limit.IsZero() || v.memory {
			continue
		}
		used := diskUsage(v.Path)
		if used > v.limit.Value() {
			return Overuse{Volume: name, Limit: *v.limit, Used: *resource.NewQuantity(used, resource.BinarySI)}, true
		}
	}
	return Overuse{}, false
}

func diskUsage(root string) int64 {
	var total int64
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file removed meanwhile
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			}
		}
		return nil
	})
	return total
}
