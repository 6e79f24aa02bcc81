package statefulset

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A set's claims: for each volumeClaimTemplate and ordinal, the claim <template>-<set>-<ordinal>,
// created before the pod of that ordinal and kept when the pod goes, so a pod made again under
// the same name mounts the same volume. persistentVolumeClaimRetentionPolicy decides, through
// owner references the garbage collector follows, whether the claims go with the set
// (whenDeleted) or with the pods of ordinals scaled away (whenScaled).

var podGVK = corev1.SchemeGroupVersion.WithKind("Pod")

func claimName(s *appsv1.StatefulSet, t *corev1.PersistentVolumeClaim, ordinal int) string {
	return t.Name + "-" + s.Name + "-" + strconv.Itoa(ordinal)
}

// newClaim is the claim of template t for ordinal: the template's labels with the set's
// selector labels over them, its annotations and spec. Admission defaults the storage class.
func newClaim(s *appsv1.StatefulSet, t *corev1.PersistentVolumeClaim, ordinal int) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: claimName(s, t, ordinal), Namespace: s.Namespace,
			Labels: maps.Clone(t.Labels), Annotations: maps.Clone(t.Annotations),
		},
		Spec: *t.Spec.DeepCopy(),
	}
	if s.Spec.Selector != nil && len(s.Spec.Selector.MatchLabels) > 0 {
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		maps.Copy(c.Labels, s.Spec.Selector.MatchLabels)
	}
	return c
}

// addClaimVolumes gives p a volume per template, named like it, on the ordinal's claim; a
// volume of the pod template with that name is replaced.
func addClaimVolumes(s *appsv1.StatefulSet, p *corev1.Pod, ordinal int) {
	for i := range s.Spec.VolumeClaimTemplates {
		t := &s.Spec.VolumeClaimTemplates[i]
		v := corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(s, t, ordinal)},
		}}
		replaced := false
		for j := range p.Spec.Volumes {
			if p.Spec.Volumes[j].Name == t.Name {
				p.Spec.Volumes[j], replaced = v, true
			}
		}
		if !replaced {
			p.Spec.Volumes = append(p.Spec.Volumes, v)
		}
	}
}

func (c *controller) claim(ns, name string) *corev1.PersistentVolumeClaim {
	o, ok := c.claims.Get(ns, name)
	if !ok {
		return nil
	}
	return o.(*corev1.PersistentVolumeClaim)
}

// ensureClaims creates the claims of ordinal that are missing. A claim being deleted is an
// error: the pod must wait for it to go and be made again, not mount a volume on its way out.
// The sync is retried, and the claim's deletion wakes the set.
func (c *controller) ensureClaims(ctx context.Context, s *appsv1.StatefulSet, ordinal int) error {
	var errs []error
	for i := range s.Spec.VolumeClaimTemplates {
		t := &s.Spec.VolumeClaimTemplates[i]
		name := claimName(s, t, ordinal)
		if existing := c.claim(s.Namespace, name); existing != nil {
			if existing.DeletionTimestamp != nil {
				errs = append(errs, fmt.Errorf("persistentvolumeclaim %s/%s is being deleted", s.Namespace, name))
			} else if err := c.fixRefs(ctx, s, nil, existing, ordinal); err != nil {
				// A reference to a pod scaled away earlier would have the claim collected
				// under the pod about to be made.
				errs = append(errs, err)
			}
			continue
		}
		claim := newClaim(s, t, ordinal)
		claim.OwnerReferences = retentionRefs(s, nil, nil, ordinal)
		switch _, err := c.client.Create(ctx, claim); {
		case err == nil:
			c.podCtl.Recorder.Eventf(ctx, s, corev1.EventTypeNormal, "SuccessfulCreate", "Created claim %s for pod %s", name, podName(s, ordinal))
		case apierrors.IsAlreadyExists(err):
			// The cache has not seen it yet: retry once it has, to know whether it is being
			// deleted before a pod mounts it.
			errs = append(errs, fmt.Errorf("persistentvolumeclaim %s/%s exists but is not in the cache yet", s.Namespace, name))
		default:
			c.podCtl.Recorder.Eventf(ctx, s, corev1.EventTypeWarning, "FailedCreate", "Error creating claim %s for pod %s: %v", name, podName(s, ordinal), err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// retentionRefs is refs (a claim's owner references) as persistentVolumeClaimRetentionPolicy
// wants them for the claim of ordinal, whose pod is p (nil when there is none): whenScaled
// Delete makes the pod the only owner when its ordinal is beyond the replicas; otherwise
// whenDeleted Delete makes the set an owner. References the controller would add but the policy no longer
// wants (the set's; any pod of the ordinal's name) are dropped; others are kept.
func retentionRefs(s *appsv1.StatefulSet, p *corev1.Pod, refs []metav1.OwnerReference, ordinal int) []metav1.OwnerReference {
	policy := s.Spec.PersistentVolumeClaimRetentionPolicy
	if policy == nil {
		policy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	var out []metav1.OwnerReference
	otherController := false
	for _, r := range refs {
		switch {
		case r.UID == s.UID:
		case r.Kind == podGVK.Kind && r.APIVersion == podGVK.GroupVersion().String() && r.Name == podName(s, ordinal):
		default:
			out = append(out, r)
			otherController = otherController || (r.Controller != nil && *r.Controller)
		}
	}
	start := startOrdinal(s)
	scaledAway := policy.WhenScaled == appsv1.DeletePersistentVolumeClaimRetentionPolicyType && p != nil &&
		(ordinal < start || ordinal >= start+replicaCount(s))
	switch {
	case scaledAway:
		// The pod alone: the garbage collector deletes an object only once all its owners
		// are gone, so the set must not hold the claim back.
		out = append(out, metav1.OwnerReference{APIVersion: podGVK.GroupVersion().String(), Kind: podGVK.Kind, Name: p.Name, UID: p.UID})
	case policy.WhenDeleted == appsv1.DeletePersistentVolumeClaimRetentionPolicyType:
		ref := *metav1.NewControllerRef(s, gvk)
		if otherController {
			ref.Controller = nil
		}
		out = append(out, ref)
	}
	return out
}

// applyRetention brings the owner references of the claims of p's ordinal in line with the
// policy (retentionRefs); claims not there yet are left to ensureClaims.
func (c *controller) applyRetention(ctx context.Context, s *appsv1.StatefulSet, p *corev1.Pod) error {
	ordinal := ordinalOf(s, p)
	var errs []error
	for i := range s.Spec.VolumeClaimTemplates {
		claim := c.claim(s.Namespace, claimName(s, &s.Spec.VolumeClaimTemplates[i], ordinal))
		if claim == nil || claim.DeletionTimestamp != nil {
			continue
		}
		if err := c.fixRefs(ctx, s, p, claim, ordinal); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *controller) fixRefs(ctx context.Context, s *appsv1.StatefulSet, p *corev1.Pod, claim *corev1.PersistentVolumeClaim, ordinal int) error {
	want := retentionRefs(s, p, claim.OwnerReferences, ordinal)
	if sameRefs(want, claim.OwnerReferences) {
		return nil
	}
	next := claim.DeepCopy()
	next.OwnerReferences = want
	if _, err := c.client.Update(ctx, next); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

func sameRefs(a, b []metav1.OwnerReference) bool {
	if len(a) != len(b) {
		return false
	}
	uids := map[types.UID]metav1.OwnerReference{}
	for _, r := range b {
		uids[r.UID] = r
	}
	for _, r := range a {
		if o, ok := uids[r.UID]; !ok || !apiequality.Semantic.DeepEqual(o, r) {
			return false
		}
	}
	return true
}
