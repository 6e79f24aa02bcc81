package controlplane

import (
	"fmt"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/internal/diskspace"
)

// guardDisk watches the disk of the embedded JetStream store (nil without one: in memory, or
// an external NATS, whose operator sets its max_file_store): growing writes are refused with
// 507 before the disk is full, deletes still fit, and writes resume once space returns.
func (cp *ControlPlane) guardDisk() (statelog.Space, error) {
	if cp.cfg.DataDir == "" || cp.cfg.NATSURL != "" {
		return nil, nil
	}
	g, err := diskspace.New(diskspace.Config{Dir: cp.cfg.DataDir, MinFree: cp.cfg.DiskMinFree, Reserve: cp.cfg.DiskReserve})
	if err != nil {
		return nil, err
	}
	cp.wg.Add(1)
	go func() { defer cp.wg.Done(); g.Run(cp.bg) }()
	return g, nil
}

// storeLimit is the embedded JetStream's storage limit: the whole disk, so that the guard's
// floor, below which deletes still go through, stops growth first, not JetStream's default
// limit (75% of the disk free at its start), which refuses deletes as well.
func storeLimit(dir string) (int64, error) {
	n, err := diskspace.Size(dir)
	if err != nil {
		return 0, fmt.Errorf("data dir: %w", err)
	}
	return int64(n), nil
}

// writable is the apiserver's readiness: the state log takes growing writes, and the embedded
// JetStream reports no store failure (a write error its file store keeps until a restart, as
// after an ENOSPC that reached it).
func (cp *ControlPlane) writable() error {
	if err := cp.Log.Writable(); err != nil {
		return err
	}
	if cp.NATS == nil {
		return nil
	}
	if h := cp.NATS.NATS().Healthz(nil); h.Error != "" {
		return fmt.Errorf("state log not writable: %s", h.Error)
	}
	return nil
}
