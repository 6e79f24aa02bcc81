package controlplane

import (
	"fmt"
	"slices"
	"strings"

	"github.com/skiff-sh/skiff/actors/controllers"
)

// Component names for Config.Components (`skiff server --components`). Single controllers
// (controllers.All) are components too.
const (
	APIServer         = "apiserver"
	Scheduler         = "scheduler"
	ControllerManager = "controller-manager" // every controller
	Informers         = "informers"          // the shared informer caches (always runs)
)

// Lease names: with Config.LeaderElect, only the holder of a lease runs what it guards.
const (
	SchedulerLease         = "skiff-scheduler"
	ControllerManagerLease = "skiff-controller-manager"
	CompactorLease         = "skiff-compactor" // log compaction, among apiserver replicas
)

// Components is every name Config.Components accepts.
func Components() []string {
	return append([]string{APIServer, Scheduler, ControllerManager}, controllers.All...)
}

func (c Config) validateComponents() error {
	if c.Components != nil && len(c.Components) == 0 {
		return fmt.Errorf("components: empty list (known: %s)", strings.Join(Components(), ", "))
	}
	known := Components()
	for _, n := range c.Components {
		if !slices.Contains(known, n) {
			return fmt.Errorf("components: unknown component %q (known: %s)", n, strings.Join(known, ", "))
		}
	}
	return nil
}

// Runs reports whether the named component runs in this process. A controller runs when it
// is listed itself or "controller-manager" is.
func (c Config) Runs(name string) bool {
	if c.Components == nil || slices.Contains(c.Components, name) {
		return true
	}
	return slices.Contains(controllers.All, name) && slices.Contains(c.Components, ControllerManager)
}

func (c Config) controllerNames() []string {
	var names []string
	for _, n := range controllers.All {
		if c.Runs(n) {
			names = append(names, n)
		}
	}
	return names
}
