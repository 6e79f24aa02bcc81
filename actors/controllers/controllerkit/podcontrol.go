package controllerkit

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/events"
	"github.com/skiff-sh/skiff/schemas"
)

// PodControl creates and deletes the pods of a workload controller and records the Events
// users look for (SuccessfulCreate, FailedCreate, SuccessfulDelete, FailedDelete).
type PodControl struct {
	Client   *apiclient.Client
	Recorder *events.Recorder
}

// PodFromTemplate builds a pod for owner: generateName "<owner>-", the template's labels and
// annotations, and a controller reference.
func PodFromTemplate(owner metav1.Object, gvk schema.GroupVersionKind, t *corev1.PodTemplateSpec) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       owner.GetNamespace(),
			GenerateName:    owner.GetName() + "-",
			Labels:          map[string]string{},
			Annotations:     map[string]string{},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, gvk)},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	for k, v := range t.Labels {
		p.Labels[k] = v
	}
	for k, v := range t.Annotations {
		p.Annotations[k] = v
	}
	return p
}

// Create writes pod and records the outcome on owner. The controllers learn the pod from
// their informers, so only the answer's metadata (the name given) is decoded.
func (pc PodControl) Create(ctx context.Context, owner runtime.Object, pod *corev1.Pod) error {
	created, err := pc.Client.CreateMeta(ctx, pod)
	if err != nil {
		if !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			pc.Recorder.Eventf(ctx, owner, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
		}
		return err
	}
	pc.Recorder.Eventf(ctx, owner, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", created.Name)
	return nil
}

// Delete deletes pod (only that incarnation of it: UID precondition); NotFound is success.
func (pc PodControl) Delete(ctx context.Context, owner runtime.Object, pod *corev1.Pod) error {
	uid := pod.UID
	err := pc.Client.Delete(ctx, podKind(), pod.Namespace, pod.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		pc.Recorder.Eventf(ctx, owner, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
		return err
	}
	pc.Recorder.Eventf(ctx, owner, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", pod.Name)
	return nil
}

func podKind() *schemas.Kind { return MustKind("", "pods") }

// SlowStartBatch runs fn count times in batches of 1, 2, 4, ... concurrent calls (starting at
// initial), stopping after the first batch with an error, like Kubernetes: a create that keeps
// failing (invalid template, terminating namespace) then costs a few calls, not hundreds. It
// returns how many calls succeeded and how many were made.
func SlowStartBatch(count, initial int, fn func() error) (succeeded, attempted int, err error) {
	for batch := min(count, initial); batch > 0; batch = min(2*batch, count-attempted) {
		var wg sync.WaitGroup
		errs := make(chan error, batch)
		for i := 0; i < batch; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fn(); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		attempted += batch
		succeeded += batch - len(errs)
		if err, ok := <-errs; ok {
			return succeeded, attempted, err
		}
	}
	return succeeded, attempted, nil
}
