// Package review answers the API's questions about access and identity, as the
// authorization.k8s.io/v1 and authentication.k8s.io/v1 review kinds ask them: may this user
// do that (SubjectAccessReview, LocalSubjectAccessReview, SelfSubjectAccessReview), what may I
// do here (SelfSubjectRulesReview), who am I (SelfSubjectReview), whose is this token
// (TokenReview). Reviews are created, answered and forgotten: none is stored in the log.
package review

import (
	"context"
	"net/http"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/actors/apiserver/authz"
)

// Resources are the review resources in discovery, by group/version, as Kubernetes lists them.
func Resources() map[schema.GroupVersion][]metav1.APIResource {
	create := metav1.Verbs{"create"}
	res := func(name, kind string, namespaced bool) metav1.APIResource {
		return metav1.APIResource{Name: name, SingularName: strings.TrimSuffix(name, "s"), Namespaced: namespaced, Kind: kind, Verbs: create}
	}
	return map[schema.GroupVersion][]metav1.APIResource{
		authenticationv1.SchemeGroupVersion: {
			res("selfsubjectreviews", "SelfSubjectReview", false),
			res("tokenreviews", "TokenReview", false),
		},
		authorizationv1.SchemeGroupVersion: {
			res("localsubjectaccessreviews", "LocalSubjectAccessReview", true),
			res("selfsubjectaccessreviews", "SelfSubjectAccessReview", false),
			res("selfsubjectrulesreviews", "SelfSubjectRulesReview", false),
			res("subjectaccessreviews", "SubjectAccessReview", false),
		},
	}
}

// Access answers whether u may do what attrs (exactly one of res, nonRes) describe.
func Access(az authz.Authorizer, u authn.User, res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
	a := authz.Attributes{User: u}
	if res != nil {
		a.ResourceRequest, a.Verb, a.APIGroup, a.Resource = true, res.Verb, res.Group, res.Resource
		a.Subresource, a.Namespace, a.Name = res.Subresource, res.Namespace, res.Name
	} else {
		a.Verb, a.Path = nonRes.Verb, nonRes.Path
	}
	if az == nil {
		return authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "authorization is off: every authenticated user may do anything"}
	}
	ok, reason := az.Authorize(a)
	return authorizationv1.SubjectAccessReviewStatus{Allowed: ok, Reason: reason}
}

// Rules answers what u may do in namespace.
func Rules(az authz.Authorizer, u authn.User, namespace string) authorizationv1.SubjectRulesReviewStatus {
	if az == nil {
		return authorizationv1.SubjectRulesReviewStatus{
			ResourceRules:    []authorizationv1.ResourceRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
			NonResourceRules: []authorizationv1.NonResourceRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
		}
	}
	rr, ok := az.(authz.RulesResolver)
	if !ok {
		return authorizationv1.SubjectRulesReviewStatus{Incomplete: true, EvaluationError: "the authorizer cannot list rules",
			ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
	}
	r := rr.ReviewRules(u, namespace)
	st := authorizationv1.SubjectRulesReviewStatus{ResourceRules: r.Resource, NonResourceRules: r.NonResource,
		Incomplete: r.Incomplete, EvaluationError: r.Error}
	if st.ResourceRules == nil {
		st.ResourceRules = []authorizationv1.ResourceRule{}
	}
	if st.NonResourceRules == nil {
		st.NonResourceRules = []authorizationv1.NonResourceRule{}
	}
	return st
}

// UserInfo is u as the reviews report it.
func UserInfo(u authn.User) authenticationv1.UserInfo {
	info := authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		info.Extra = map[string]authenticationv1.ExtraValue{}
		for k, v := range u.Extra {
			info.Extra[k] = v
		}
	}
	return info
}

// SubjectUser is the user a SubjectAccessReview asks about.
func SubjectUser(spec authorizationv1.SubjectAccessReviewSpec) authn.User {
	u := authn.User{Name: spec.User, UID: spec.UID, Groups: spec.Groups}
	if len(spec.Extra) > 0 {
		u.Extra = map[string][]string{}
		for k, v := range spec.Extra {
			u.Extra[k] = v
		}
	}
	return u
}

// Token asks the API server's authenticators about token, exactly as they judge a request
// bearing it, so every token authenticator in the chain answers TokenReview too. The audiences
// asked for travel in the context (authn.AudiencesFrom) for audience-aware authenticators.
func Token(ctx context.Context, an *authn.Authenticator, token string, audiences, apiAudiences []string) authenticationv1.TokenReviewStatus {
	if an == nil {
		return authenticationv1.TokenReviewStatus{Error: "authentication is off on this API server"}
	}
	if len(audiences) == 0 { // the API's own, as kube-apiserver reviews for them
		audiences = apiAudiences
	}
	r, err := http.NewRequestWithContext(authn.WithAudiences(ctx, audiences), http.MethodGet, "/", nil)
	if err != nil {
		return authenticationv1.TokenReviewStatus{Error: err.Error()}
	}
	r.Header.Set("Authorization", "Bearer "+token)
	u, found, err := an.Authenticate(r)
	if err != nil || !found {
		msg := "invalid bearer token"
		if err != nil && err != authn.ErrInvalid {
			msg = err.Error()
		}
		return authenticationv1.TokenReviewStatus{Error: msg}
	}
	// Audience-agnostic credentials (static tokens) are good for the API's audiences only.
	matched := u.Audiences
	if matched == nil {
		matched = intersect(apiAudiences, audiences)
		if len(apiAudiences) > 0 && len(matched) == 0 {
			return authenticationv1.TokenReviewStatus{Error: "token audiences are not accepted: " + strings.Join(audiences, ", ")}
		}
	}
	return authenticationv1.TokenReviewStatus{Authenticated: true, User: UserInfo(u), Audiences: matched}
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
