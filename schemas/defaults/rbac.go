package defaults

import rbacv1 "k8s.io/api/rbac/v1"

// Subjects fills in the API group of User and Group subjects, as Kubernetes' rbac/v1 defaults do,
// so `kind: User, name: bob` is enough.
func Subjects(subs []rbacv1.Subject) {
	for i := range subs {
		s := &subs[i]
		if s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
		}
	}
}
