package kubelet

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"github.com/skiff-sh/skiff/schemas/podspec"
)

// stopOrder groups a pod's running containers into the waves terminate stops them in: every
// container but the sidecars, then each sidecar alone, the last one first.
func stopOrder(pod *corev1.Pod, cur *kruntime.SandboxStatus) [][]kruntime.ContainerStatus {
	sidecars := map[string]int{}
	for i := range pod.Spec.InitContainers {
		if podspec.IsSidecar(&pod.Spec.InitContainers[i]) {
			sidecars[pod.Spec.InitContainers[i].Name] = len(sidecars)
		}
	}
	waves := make([][]kruntime.ContainerStatus, 1+len(sidecars))
	for _, c := range cur.Containers {
		if c.State != kruntime.StateRunning {
			continue
		}
		if i, ok := sidecars[c.Name]; ok {
			waves[len(sidecars)-i] = append(waves[len(sidecars)-i], c)
		} else {
			waves[0] = append(waves[0], c)
		}
	}
	return waves
}

// stopAll stops containers in parallel, each with the grace given (its preStop hook first).
func (k *kubelet) stopAll(ctx context.Context, pod *corev1.Pod, cs []kruntime.ContainerStatus, grace time.Duration) error {
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for i, c := range cs {
		k.recorder.Eventf(ctx, pod, corev1.EventTypeNormal, "Killing", "Stopping container %s", c.Name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = k.rt.StopContainer(ctx, c.ID, k.preStop(ctx, pod, c.Name, c.ID, grace))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
