package crd

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/schemas"
)

// CleanupFinalizer holds a CRD being deleted until its objects are gone (kube-apiserver's name).
const CleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io"

func hasCleanupFinalizer(c *apiextensionsv1.CustomResourceDefinition) bool {
	return slices.Contains(c.Finalizers, CleanupFinalizer)
}

// Admit sets what kube-apiserver's CRD strategy and its naming and establishing controllers
// decide, on every write of a CRD: the cleanup finalizer on create, the storage version in
// status.storedVersions, and the NamesAccepted, Established and Terminating conditions with
// status.acceptedNames. others are the stored CRDs (crd's own stored copy among them).
func Admit(crd *apiextensionsv1.CustomResourceDefinition, others []*apiextensionsv1.CustomResourceDefinition, create bool, now metav1.Time) {
	if create {
		crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
		if !hasCleanupFinalizer(crd) {
			crd.Finalizers = append(crd.Finalizers, CleanupFinalizer)
		}
	}
	if sv, err := apihelpers.GetCRDStorageVersion(crd); err == nil && !slices.Contains(crd.Status.StoredVersions, sv) {
		crd.Status.StoredVersions = append(crd.Status.StoredVersions, sv)
	}
	set := func(t apiextensionsv1.CustomResourceDefinitionConditionType, ok bool, reason, msg string) {
		st := apiextensionsv1.ConditionFalse
		if ok {
			st = apiextensionsv1.ConditionTrue
		}
		apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
			Type: t, Status: st, Reason: reason, Message: msg, LastTransitionTime: now})
	}
	if crd.DeletionTimestamp != nil {
		set(apiextensionsv1.Terminating, true, "InstanceDeletionInProgress", "CustomResource deletion is in progress")
	}
	if apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
		// Once established, names stay as accepted (kube lets only non-conflicting changes in).
		if conflict := nameConflict(crd, others); conflict == "" {
			crd.Status.AcceptedNames = crd.Spec.Names
		}
		return
	}
	if conflict := nameConflict(crd, others); conflict != "" {
		set(apiextensionsv1.NamesAccepted, false, "NameConflict", conflict)
		set(apiextensionsv1.Established, false, "NotAccepted", "not all names are accepted")
		return
	}
	crd.Status.AcceptedNames = crd.Spec.Names
	set(apiextensionsv1.NamesAccepted, true, "NoConflicts", "no conflicts found")
	set(apiextensionsv1.Established, true, "InitialNamesAccepted", "the initial names have been accepted")
}

// nameConflict names the first of crd's names already used in its group by another CRD's
// accepted names or by a built-in kind ("" when none is).
func nameConflict(crd *apiextensionsv1.CustomResourceDefinition, others []*apiextensionsv1.CustomResourceDefinition) string {
	n := crd.Spec.Names
	plurals := []string{n.Plural}
	singles := append([]string{n.Singular}, n.ShortNames...)
	kinds := []string{n.Kind, n.ListKind}
	for _, k := range schemas.Kinds() {
		if k.Custom != nil || k.GVK.Group != crd.Spec.Group {
			continue
		}
		if used := firstShared(plurals, []string{k.Resource}); used != "" {
			return fmt.Sprintf("%q is already in use", used)
		}
		if used := firstShared(kinds, []string{k.GVK.Kind, k.ListKind}); used != "" {
			return fmt.Sprintf("%q is already in use", used)
		}
	}
	for _, o := range others {
		if o.Name == crd.Name || o.Spec.Group != crd.Spec.Group {
			continue
		}
		a := o.Status.AcceptedNames
		if used := firstShared(plurals, []string{a.Plural}); used != "" {
			return fmt.Sprintf("%q is already in use", used)
		}
		if used := firstShared(singles, append([]string{a.Singular}, a.ShortNames...)); used != "" {
			return fmt.Sprintf("%q is already in use", used)
		}
		if used := firstShared(kinds, []string{a.Kind, a.ListKind}); used != "" {
			return fmt.Sprintf("%q is already in use", used)
		}
	}
	return ""
}

func firstShared(a, b []string) string {
	for _, x := range a {
		if x == "" {
			continue
		}
		for _, y := range b {
			if strings.EqualFold(x, y) {
				return x
			}
		}
	}
	return ""
}
