package deployment

import (
	"encoding/json"
	"hash/fnv"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/rand"
)

// ComputeHash names a pod template (and the collision count, which changes the name when a
// ReplicaSet of that name already exists with another template): FNV-32a of its JSON, encoded
// with the alphabet Kubernetes uses for generated names.
func ComputeHash(t *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	data, _ := json.Marshal(t) // struct fields in a fixed order and sorted map keys: deterministic
	h.Write(data)
	if collisionCount != nil {
		h.Write([]byte(strconv.FormatInt(int64(*collisionCount), 10)))
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// equalIgnoreHash compares two templates without the pod-template-hash label.
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, HashLabel)
	delete(b.Labels, HashLabel)
	if len(a.Labels) == 0 {
		a.Labels = nil
	}
	if len(b.Labels) == 0 {
		b.Labels = nil
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

// findNewRS is the ReplicaSet running d's current template: the same template, or (in case
// defaulting made the stored copies differ) the one carrying the template's current hash. The
// oldest wins if there are several.
func findNewRS(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	hash := ComputeHash(&d.Spec.Template, d.Status.CollisionCount)
	var found *appsv1.ReplicaSet
	for _, rs := range sortByCreation(rss) {
		if equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
		if found == nil && rs.Labels[HashLabel] == hash {
			found = rs
		}
	}
	return found
}
