package apiserver

import (
	"context"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/actors/apiserver/review"
)

// The review kinds (package review) are served here, outside the schemas registry: they are
// created and answered, never stored, listed or watched. RBAC authorizes the create like any
// other (system:basic-user grants the self reviews to every authenticated user).

// reviewResources are the reviews in discovery.
var reviewResources = review.Resources()

type reviewFunc func(s *Server, ctx context.Context, namespace string, body []byte) (any, error)

var reviews = map[schema.GroupVersionResource]reviewFunc{
	authorizationv1.SchemeGroupVersion.WithResource("selfsubjectaccessreviews"):  (*Server).selfSubjectAccessReview,
	authorizationv1.SchemeGroupVersion.WithResource("subjectaccessreviews"):      (*Server).subjectAccessReview,
	authorizationv1.SchemeGroupVersion.WithResource("localsubjectaccessreviews"): (*Server).localSubjectAccessReview,
	authorizationv1.SchemeGroupVersion.WithResource("selfsubjectrulesreviews"):   (*Server).selfSubjectRulesReview,
	authenticationv1.SchemeGroupVersion.WithResource("selfsubjectreviews"):       (*Server).selfSubjectReview,
	authenticationv1.SchemeGroupVersion.WithResource("tokenreviews"):             (*Server).tokenReview,
}

// serveReview answers a review request; false when info names no review resource.
func (s *Server) serveReview(w http.ResponseWriter, r *http.Request, info requestInfo) bool {
	gvr := info.gv.WithResource(info.resource)
	answer, ok := reviews[gvr]
	if !ok {
		return false
	}
	namespaced := info.resource == "localsubjectaccessreviews"
	switch {
	case info.name != "" || info.subresource != "" || namespaced != (info.namespace != ""):
		writeError(w, errNotServed)
	case info.verb != "create":
		writeError(w, apierrors.NewMethodNotSupported(gvr.GroupResource(), info.verb))
	default:
		body, err := s.reviewBody(w, r)
		var out any
		if err == nil {
			out, err = answer(s, r.Context(), info.namespace, body)
		}
		if err != nil {
			writeError(w, err)
			return true
		}
		writeJSON(w, http.StatusCreated, out)
	}
	return true
}

// decodeReview decodes body strictly into obj: a review with a typo would answer another question.
func decodeReview(body []byte, kind string, obj any) error {
	if len(body) == 0 {
		return badRequest("the request body is empty; a %s object is required", kind)
	}
	strictErrs, err := kjson.UnmarshalStrict(body, obj)
	if err != nil {
		return badRequest("%s: %v", kind, err)
	}
	if len(strictErrs) > 0 {
		return badRequest("%s: %v", kind, strictErrs[0])
	}
	return nil
}

func invalidReview(group, kind string, errs field.ErrorList) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: group, Kind: kind}, "", errs)
}

func (s *Server) auth() *Auth {
	if s.opts.Auth == nil {
		return &Auth{}
	}
	return s.opts.Auth
}

func requestUser(ctx context.Context) authn.User {
	if u, ok := authn.UserFrom(ctx); ok {
		return u
	}
	return unauthenticatedMaster
}

func (s *Server) selfSubjectAccessReview(ctx context.Context, _ string, body []byte) (any, error) {
	var rv authorizationv1.SelfSubjectAccessReview
	if err := decodeReview(body, "SelfSubjectAccessReview", &rv); err != nil {
		return nil, err
	}
	if errs := review.ValidateAttributes(field.NewPath("spec"), rv.Spec.ResourceAttributes, rv.Spec.NonResourceAttributes); len(errs) > 0 {
		return nil, invalidReview(authorizationv1.GroupName, "SelfSubjectAccessReview", errs)
	}
	rv.APIVersion, rv.Kind = authorizationv1.SchemeGroupVersion.String(), "SelfSubjectAccessReview"
	rv.Status = review.Access(s.auth().Authorizer, requestUser(ctx), rv.Spec.ResourceAttributes, rv.Spec.NonResourceAttributes)
	return &rv, nil
}

func (s *Server) subjectAccessReview(_ context.Context, _ string, body []byte) (any, error) {
	var rv authorizationv1.SubjectAccessReview
	if err := decodeReview(body, "SubjectAccessReview", &rv); err != nil {
		return nil, err
	}
	if errs := review.ValidateSubjectAccessReview(rv.Spec); len(errs) > 0 {
		return nil, invalidReview(authorizationv1.GroupName, "SubjectAccessReview", errs)
	}
	rv.APIVersion, rv.Kind = authorizationv1.SchemeGroupVersion.String(), "SubjectAccessReview"
	rv.Status = review.Access(s.auth().Authorizer, review.SubjectUser(rv.Spec), rv.Spec.ResourceAttributes, rv.Spec.NonResourceAttributes)
	return &rv, nil
}

func (s *Server) localSubjectAccessReview(_ context.Context, namespace string, body []byte) (any, error) {
	var rv authorizationv1.LocalSubjectAccessReview
	if err := decodeReview(body, "LocalSubjectAccessReview", &rv); err != nil {
		return nil, err
	}
	if rv.Namespace == "" {
		rv.Namespace = namespace
	}
	errs := review.ValidateLocalSubjectAccessReview(rv.Namespace, rv.Spec)
	if rv.Namespace != namespace {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "namespace"), rv.Namespace, "does not match the namespace of the request"))
	}
	if len(errs) > 0 {
		return nil, invalidReview(authorizationv1.GroupName, "LocalSubjectAccessReview", errs)
	}
	rv.APIVersion, rv.Kind = authorizationv1.SchemeGroupVersion.String(), "LocalSubjectAccessReview"
	rv.Status = review.Access(s.auth().Authorizer, review.SubjectUser(rv.Spec), rv.Spec.ResourceAttributes, nil)
	return &rv, nil
}

func (s *Server) selfSubjectRulesReview(ctx context.Context, _ string, body []byte) (any, error) {
	var rv authorizationv1.SelfSubjectRulesReview
	if err := decodeReview(body, "SelfSubjectRulesReview", &rv); err != nil {
		return nil, err
	}
	rv.APIVersion, rv.Kind = authorizationv1.SchemeGroupVersion.String(), "SelfSubjectRulesReview"
	rv.Status = review.Rules(s.auth().Authorizer, requestUser(ctx), rv.Spec.Namespace)
	return &rv, nil
}

func (s *Server) selfSubjectReview(ctx context.Context, _ string, body []byte) (any, error) {
	var rv authenticationv1.SelfSubjectReview
	if len(body) > 0 {
		if err := decodeReview(body, "SelfSubjectReview", &rv); err != nil {
			return nil, err
		}
	}
	rv.APIVersion, rv.Kind = authenticationv1.SchemeGroupVersion.String(), "SelfSubjectReview"
	rv.Status.UserInfo = review.UserInfo(requestUser(ctx))
	return &rv, nil
}

func (s *Server) tokenReview(ctx context.Context, _ string, body []byte) (any, error) {
	var rv authenticationv1.TokenReview
	if err := decodeReview(body, "TokenReview", &rv); err != nil {
		return nil, err
	}
	if rv.Spec.Token == "" {
		return nil, invalidReview(authenticationv1.GroupName, "TokenReview", field.ErrorList{field.Required(field.NewPath("spec", "token"), "the token to review")})
	}
	rv.APIVersion, rv.Kind = authenticationv1.SchemeGroupVersion.String(), "TokenReview"
	var apiAudiences []string
	if iss := s.opts.ServiceAccountIssuer; iss != nil {
		apiAudiences = iss.Audiences
	}
	rv.Status = review.Token(ctx, s.auth().Authenticator, rv.Spec.Token, rv.Spec.Audiences, apiAudiences)
	rv.Spec.Token = "" // never echo a credential
	return &rv, nil
}

// reviewBody reads a review's body, turning protobuf into JSON.
func (s *Server) reviewBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := s.readBody(w, r)
	if err == nil && isProtobuf(r.Header.Get("Content-Type")) && len(body) > 0 {
		body, err = protobufToJSON(body)
	}
	return body, err
}
