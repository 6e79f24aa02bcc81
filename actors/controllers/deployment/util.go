package deployment

import (
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func replicasOf(rs *appsv1.ReplicaSet) int32 {
	if rs == nil || rs.Spec.Replicas == nil {
		return 0
	}
	return *rs.Spec.Replicas
}

func desired(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func sumSpec(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		n += replicasOf(rs)
	}
	return n
}

func sumStatus(rss []*appsv1.ReplicaSet, f func(*appsv1.ReplicaSetStatus) int32) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += f(&rs.Status)
		}
	}
	return n
}

func revision(rs *appsv1.ReplicaSet) int64 {
	v, _ := strconv.ParseInt(rs.Annotations[RevisionAnnotation], 10, 64)
	return v
}

func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range rss {
		m = max(m, revision(rs))
	}
	return m
}

func sortByCreation(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	out := append([]*appsv1.ReplicaSet(nil), rss...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	return out
}

func activeRSs(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if replicasOf(rs) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// fenceposts resolves maxSurge (rounded up) and maxUnavailable (rounded down) against the
// desired replicas; both zero would deadlock a rollout, so maxUnavailable becomes 1.
func fenceposts(d *appsv1.Deployment) (surge, unavailable int32) {
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType && d.Spec.Strategy.Type != "" {
		return 0, 0
	}
	var ms, mu *intstr.IntOrString
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		ms, mu = ru.MaxSurge, ru.MaxUnavailable
	}
	def := intstr.FromString("25%")
	n := int(desired(d))
	s, _ := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(ms, def), n, true)
	u, _ := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(mu, def), n, false)
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(min(u, max(n, 0)))
}
