package statefulset

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// A StatefulSet's history is kept as kube keeps it, in ControllerRevisions named
// <set>-<hash> whose data is the strategic merge patch that restores the template
// ({"spec":{"template":{...,"$patch":"replace"}}}): what `kubectl rollout history` shows
// and `kubectl rollout undo` applies.

// revisionData is the patch of s's template.
func revisionData(s *appsv1.StatefulSet) ([]byte, error) {
	tmpl, err := json.Marshal(&s.Spec.Template)
	if err != nil {
		return nil, err
	}
	var t map[string]any
	if err := json.Unmarshal(tmpl, &t); err != nil {
		return nil, err
	}
	t["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": t}})
}

// templateOf reads the template back out of a revision (the "$patch" key is ignored).
func templateOf(r *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	var d struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(r.Data.Raw, &d); err != nil {
		return nil, fmt.Errorf("revision %s: %w", r.Name, err)
	}
	return &d.Spec.Template, nil
}

// hashRevision is FNV-32a of the data and the collision count, encoded as kube names objects.
func hashRevision(data []byte, collisions int32) string {
	h := fnv.New32a()
	h.Write(data)
	if collisions != 0 {
		h.Write([]byte(strconv.FormatInt(int64(collisions), 10)))
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

func newRevision(s *appsv1.StatefulSet, data []byte, number int64, collisions int32) *appsv1.ControllerRevision {
	hash := hashRevision(data, collisions)
	l := map[string]string{}
	for k, v := range s.Spec.Template.Labels {
		l[k] = v
	}
	l[RevisionLabel] = hash
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name + "-" + hash, Namespace: s.Namespace, Labels: l,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s, gvk)}},
		Data:     runtime.RawExtension{Raw: data},
		Revision: number,
	}
}

func sameTemplate(a, b *appsv1.ControllerRevision) bool {
	ta, err1 := templateOf(a)
	tb, err2 := templateOf(b)
	return err1 == nil && err2 == nil && apiequality.Semantic.DeepEqual(ta, tb)
}

// history is a set's revisions, oldest first, with the current and the update revision.
type history struct {
	all             []*appsv1.ControllerRevision
	current, update *appsv1.ControllerRevision
	collisions      int32
	currentTemplate *corev1.PodTemplateSpec
	updatedTemplate *corev1.PodTemplateSpec
}

// revisions claims s's ControllerRevisions (as pods are claimed) and finds or records the
// revision of its template: an equal latest revision is reused, an equal older one becomes the
// latest again (a rollback), else a new one is created, with the collision count raised when
// its name is taken by other data.
func (c *controller) revisions(ctx context.Context, s *appsv1.StatefulSet, sel labels.Selector) (*history, error) {
	claimed, err := controllerkit.Claim(ctx, c.client, s, gvk, sel, controllerkit.ClaimCandidates(c.revs, s), s.DeletionTimestamp == nil)
	if err != nil {
		return nil, err
	}
	h := &history{}
	for _, o := range claimed {
		h.all = append(h.all, o.(*appsv1.ControllerRevision))
	}
	sort.SliceStable(h.all, func(i, j int) bool {
		if h.all[i].Revision != h.all[j].Revision {
			return h.all[i].Revision < h.all[j].Revision
		}
		return h.all[i].Name < h.all[j].Name
	})
	if s.Status.CollisionCount != nil {
		h.collisions = *s.Status.CollisionCount
	}
	data, err := revisionData(s)
	if err != nil {
		return nil, err
	}
	var next int64 = 1
	if n := len(h.all); n > 0 {
		next = h.all[n-1].Revision + 1
	}
	want := newRevision(s, data, next, h.collisions)
	if h.update, err = c.recordRevision(ctx, s, h, want); err != nil {
		return nil, err
	}
	h.current = h.update
	for _, r := range h.all {
		if r.Name == s.Status.CurrentRevision {
			h.current = r
		}
	}
	if h.currentTemplate, err = templateOf(h.current); err != nil {
		return nil, err
	}
	h.updatedTemplate = &s.Spec.Template
	return h, nil
}

func (c *controller) recordRevision(ctx context.Context, s *appsv1.StatefulSet, h *history, want *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	for i := len(h.all) - 1; i >= 0; i-- {
		r := h.all[i]
		if !sameTemplate(r, want) {
			continue
		}
		if i == len(h.all)-1 {
			return r, nil
		}
		next := r.DeepCopy()
		next.Revision = want.Revision
		out, err := c.client.Update(ctx, next)
		if err != nil {
			return nil, err
		}
		h.all = append(append(h.all[:i:i], h.all[i+1:]...), out.(*appsv1.ControllerRevision))
		return out.(*appsv1.ControllerRevision), nil
	}
	out, err := c.client.Create(ctx, want)
	if err == nil {
		h.all = append(h.all, out.(*appsv1.ControllerRevision))
		return out.(*appsv1.ControllerRevision), nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	// The name is taken: by this very revision not yet in the cache, or by other data.
	got, gerr := c.client.Get(ctx, controllerkit.MustKind("apps", "controllerrevisions"), s.Namespace, want.Name)
	if gerr != nil {
		return nil, gerr
	}
	if r := got.(*appsv1.ControllerRevision); controllerkit.IsOwnedBy(r, s) && sameTemplate(r, want) {
		h.all = append(h.all, r)
		return r, nil
	}
	// Record the raised count, so the next sync names the revision differently.
	next := s.DeepCopy()
	next.Status.CollisionCount = ptr.To(h.collisions + 1)
	if _, err := c.client.UpdateStatus(ctx, next); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("controller revision %s exists with other data; collision count raised to %d", want.Name, h.collisions+1)
}

// truncateHistory deletes the oldest revisions no pod uses beyond revisionHistoryLimit.
func (c *controller) truncateHistory(ctx context.Context, s *appsv1.StatefulSet, h *history, pods []*corev1.Pod) error {
	live := map[string]bool{h.current.Name: true, h.update.Name: true}
	for _, p := range pods {
		live[p.Labels[RevisionLabel]] = true
	}
	var old []*appsv1.ControllerRevision
	for _, r := range h.all {
		if !live[r.Name] {
			old = append(old, r)
		}
	}
	limit := 10
	if s.Spec.RevisionHistoryLimit != nil {
		limit = int(*s.Spec.RevisionHistoryLimit)
	}
	for i := 0; i < len(old)-limit; i++ {
		uid := old[i].UID
		err := c.client.Delete(ctx, controllerkit.MustKind("apps", "controllerrevisions"), s.Namespace, old[i].Name,
			&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
