package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/actors/apiserver/authn/serviceaccount"
	"github.com/skiff-sh/skiff/schemas"
)

// Limits of a TokenRequest's expirationSeconds, as kube-apiserver validates them.
const (
	minTokenSeconds     = 600
	maxTokenSeconds     = 1 << 32
	defaultTokenSeconds = 3600
)

var tokenRequestKind = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")

// createToken serves serviceaccounts/NAME/token: a signed token for the account, for the
// audiences asked (default the API's), expiring when asked, bound to a pod or Secret when
// asked, as kube-apiserver's TokenRequest REST does. Nothing is stored.
func (s *Server) createToken(ctx context.Context, k *schemas.Kind, ns, name string, body []byte) (*authenticationv1.TokenRequest, error) {
	iss := s.opts.ServiceAccountIssuer
	if iss == nil {
		return nil, apierrors.NewMethodNotSupported(groupResource(k), "create token (this apiserver has no service account issuer: run it with API auth)")
	}
	req := &authenticationv1.TokenRequest{}
	if len(body) > 0 {
		if err := json.Unmarshal(body, req); err != nil {
			return nil, badRequest("TokenRequest: %v", err)
		}
	}
	if gvk := req.GroupVersionKind(); !gvk.Empty() && gvk != tokenRequestKind {
		return nil, badRequest("the body is a %s; serviceaccounts/token takes a %s", gvk, tokenRequestKind)
	}
	if req.Spec.ExpirationSeconds == nil {
		req.Spec.ExpirationSeconds = ptrTo(int64(defaultTokenSeconds))
	}
	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = append([]string(nil), iss.Audiences...)
	}
	if errs := validateTokenRequest(req); len(errs) > 0 {
		return nil, apierrors.NewInvalid(tokenRequestKind.GroupKind(), name, errs)
	}
	obj, err := s.get(ctx, k, ns, name)
	if err != nil {
		return nil, err
	}
	sa := obj.(*corev1.ServiceAccount)
	now := s.now()
	c := serviceaccount.Claims{Audiences: req.Spec.Audiences, IssuedAt: now, Expiry: now.Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second),
		ID: string(uuid.NewUUID()), Namespace: ns, ServiceAccount: serviceaccount.Ref{Name: sa.Name, UID: string(sa.UID)}}
	if err := s.bindToken(ctx, &c, sa, req.Spec.BoundObjectRef); err != nil {
		return nil, err
	}
	tok, err := iss.Mint(c)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out := req.DeepCopy()
	out.TypeMeta = metav1.TypeMeta{APIVersion: tokenRequestKind.GroupVersion().String(), Kind: tokenRequestKind.Kind}
	out.Name, out.Namespace = sa.Name, ns
	out.CreationTimestamp = metav1.NewTime(now.UTC().Truncate(time.Second))
	out.Status = authenticationv1.TokenRequestStatus{Token: tok, ExpirationTimestamp: metav1.NewTime(c.Expiry.UTC().Truncate(time.Second))}
	return out, nil
}

func validateTokenRequest(req *authenticationv1.TokenRequest) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "expirationSeconds")
	switch e := *req.Spec.ExpirationSeconds; {
	case e < minTokenSeconds:
		errs = append(errs, field.Invalid(p, e, "may not specify a duration less than 10 minutes"))
	case e > maxTokenSeconds:
		errs = append(errs, field.Invalid(p, e, "may not specify a duration larger than 2^32 seconds"))
	}
	for i, a := range req.Spec.Audiences {
		if a == "" {
			errs = append(errs, field.Required(field.NewPath("spec", "audiences").Index(i), "an audience may not be empty"))
		}
	}
	if ref := req.Spec.BoundObjectRef; ref != nil && ref.Name == "" {
		errs = append(errs, field.Required(field.NewPath("spec", "boundObjectRef", "name"), ""))
	}
	return errs
}

// bindToken checks the object the token is to be bound to and records it in c. A node may
// only ask for tokens bound to its own pods (NodeRestriction's rule).
func (s *Server) bindToken(ctx context.Context, c *serviceaccount.Claims, sa *corev1.ServiceAccount, ref *authenticationv1.BoundObjectReference) error {
	u, _ := authn.UserFrom(ctx)
	node := u.NodeName()
	if ref == nil {
		if node != "" {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, sa.Name, fmt.Errorf("node requested token not bound to a pod"))
		}
		return nil
	}
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	if gvk.Group != "" || (ref.APIVersion != "" && gvk.Version != "v1") || (gvk.Kind != "Pod" && gvk.Kind != "Secret") {
		return badRequest("cannot bind token to object of type %s: tokens are bound to v1 Pods and Secrets", gvk)
	}
	if node != "" && gvk.Kind != "Pod" {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, sa.Name, fmt.Errorf("node requested token not bound to a pod"))
	}
	k, _ := schemas.ByResource("", "v1", map[string]string{"Pod": "pods", "Secret": "secrets"}[gvk.Kind])
	obj, err := s.get(ctx, k, sa.Namespace, ref.Name)
	if err != nil {
		return err
	}
	m := mustMeta(obj)
	if ref.UID != "" && ref.UID != m.GetUID() {
		return apierrors.NewConflict(schema.GroupResource{Resource: gvk.Kind}, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	bound := &serviceaccount.Ref{Name: m.GetName(), UID: string(m.GetUID())}
	if gvk.Kind == "Secret" {
		c.Secret = bound
		return nil
	}
	pod := obj.(*corev1.Pod)
	if pod.Spec.ServiceAccountName != sa.Name {
		return badRequest("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", sa.Name)
	}
	if node != "" && pod.Spec.NodeName != node {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, sa.Name, fmt.Errorf("node requested token bound to a pod scheduled on a different node"))
	}
	c.Pod = bound
	if pod.Spec.NodeName != "" {
		nk, _ := schemas.ByResource("", "v1", "nodes")
		if n, err := s.get(ctx, nk, "", pod.Spec.NodeName); err == nil {
			c.Node = &serviceaccount.Ref{Name: pod.Spec.NodeName, UID: string(mustMeta(n).GetUID())}
		}
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }

// serveDocument answers GETs with a fixed document (OIDC discovery, the JWKS).
func serveDocument(doc []byte, contentType string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, apierrors.NewMethodNotSupported(schema.GroupResource{}, r.Method))
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_, _ = w.Write(doc)
	}
}
