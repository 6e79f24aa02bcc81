package kubelet

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// A projected token is asked for as the node, bound to the pod, and authenticates as the pod's
// service account; it is reused while fresh and replaced once 80% of its life has passed; a
// pod bound to another node gets none.
func TestProjectedTokensAsTheNode(t *testing.T) {
	ctx := context.Background()
	cp := apiServerWithAuth(t)
	if _, err := cp.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"}}); err != nil {
		t.Fatal(err)
	}
	pod := func(name, node string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "app", Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
		o, err := cp.Client.Create(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return o.(*corev1.Pod)
	}
	mine, theirs := pod("web", "n1"), pod("other", "n2")
	tokens := newTokenCache(asNode(t, cp, "n1"))
	now := time.Now()
	tokens.now = func() time.Time { return now }
	src := &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(int64(3600))}

	first, err := tokens.get(ctx, mine, src)
	if err != nil {
		t.Fatal(err)
	}
	review := func(tok []byte) authenticationv1.TokenReviewStatus {
		t.Helper()
		body, _ := json.Marshal(&authenticationv1.TokenReview{TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"},
			Spec: authenticationv1.TokenReviewSpec{Token: string(tok)}})
		out, err := cp.Client.Raw(ctx, http.MethodPost, "/apis/authentication.k8s.io/v1/tokenreviews", "application/json", body)
		if err != nil {
			t.Fatal(err)
		}
		var r authenticationv1.TokenReview
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	st := review(first)
	if !st.Authenticated || st.User.Username != "system:serviceaccount:default:app" {
		t.Fatalf("token review: %+v, want authenticated as system:serviceaccount:default:app", st)
	}

	now = now.Add(30 * time.Minute) // under 80% of the hour: the same token
	if again, err := tokens.get(ctx, mine, src); err != nil || string(again) != string(first) {
		t.Fatalf("a fresh token was not reused (err %v)", err)
	}
	now = now.Add(20 * time.Minute) // past 80%: rotated
	rotated, err := tokens.get(ctx, mine, src)
	if err != nil {
		t.Fatal(err)
	}
	if string(rotated) == string(first) || !review(rotated).Authenticated {
		t.Fatal("the token was not replaced by a new valid one after 80% of its life")
	}

	if _, err := tokens.get(ctx, theirs, src); !apierrors.IsForbidden(err) {
		t.Fatalf("a token for another node's pod: %v, want 403", err)
	}
	// Bound to the pod: once the pod is gone, so is the token's validity.
	if err := cp.Client.Delete(ctx, controllerkit.MustKind("", "pods"), "default", "web", &metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	if review(rotated).Authenticated {
		t.Fatal("the token still authenticates after its pod was deleted: not bound to the pod")
	}
}
