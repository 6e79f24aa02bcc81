package serviceaccount

import (
	"context"
	"errors"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/logvalue"
)

// Groups every account is in, besides system:serviceaccounts:<ns>.
const (
	AllGroup    = "system:serviceaccounts"
	GroupPrefix = "system:serviceaccounts:"
)

// podDeletionGrace is how long a token bound to a pod being deleted stays valid, as in kube: its
// containers may still need the API while they stop.
const podDeletionGrace = 60 * time.Second

// Authenticator accepts tokens of its issuer while what they name still exists: the account,
// and the pod or Secret they are bound to, each with the token's UID. It is an
// authn.TokenLookup, placed after the static tokens in the apiserver's chain.
type Authenticator struct {
	Issuer *Issuer
	Log    *statelog.Log // the apiserver's state log, read from its view
	Now    func() time.Time
	Logger *slog.Logger
}

// Lookup implements authn.TokenLookup.
func (a *Authenticator) Lookup(ctx context.Context, token string) (authn.User, bool) {
	u, err := a.Authenticate(ctx, token)
	if err != nil {
		if !errors.Is(err, ErrNotOurs) && a.Logger != nil {
			a.Logger.Debug("service account token refused", "err", err)
		}
		return authn.User{}, false
	}
	return u, true
}

// Authenticate verifies token and returns its account's user, or why it is refused: for the
// audiences in ctx (a TokenReview's), else for the API's.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (authn.User, error) {
	now := time.Now()
	if a.Now != nil {
		now = a.Now()
	}
	c, err := a.Issuer.VerifyFor(token, now, authn.AudiencesFrom(ctx))
	if err != nil {
		return authn.User{}, err
	}
	sa, err := a.live(ctx, "serviceaccounts", c.Namespace, c.ServiceAccount)
	if err != nil {
		return authn.User{}, err
	}
	if sa.DeletionTimestamp != nil {
		return authn.User{}, errors.New("service account is being deleted")
	}
	if c.Pod != nil {
		pod, err := a.live(ctx, "pods", c.Namespace, *c.Pod)
		if err != nil {
			return authn.User{}, err
		}
		if pod.DeletionTimestamp != nil && pod.DeletionTimestamp.Add(podDeletionGrace).Before(now) {
			return authn.User{}, errors.New("bound pod has been deleted")
		}
	}
	if c.Secret != nil {
		s, err := a.live(ctx, "secrets", c.Namespace, *c.Secret)
		if err != nil {
			return authn.User{}, err
		}
		if s.DeletionTimestamp != nil {
			return authn.User{}, errors.New("bound secret is being deleted")
		}
	}
	u := UserOf(c.Namespace, c.ServiceAccount.Name)
	u.Audiences = c.Audiences
	return u, nil
}

// UserOf is the user an account authenticates as, with its groups.
func UserOf(namespace, name string) authn.User {
	return authn.User{Name: UserName(namespace, name), Groups: []string{AllGroup, GroupPrefix + namespace, authn.GroupAuthenticated}}
}

// live reads the metadata of what ref names and checks its UID. The view answers first; a miss
// is asked again at the latest revision, since the object may have just been written through
// another replica.
func (a *Authenticator) live(ctx context.Context, resource, namespace string, ref Ref) (*metav1.ObjectMeta, error) {
	k, _ := schemas.ByResource("", "v1", resource)
	key := schemas.StorageKey(k, namespace, ref.Name)
	e, err := a.Log.Get(ctx, key, statelog.ReadOptions{})
	if errors.Is(err, statelog.ErrNotFound) {
		e, err = a.Log.Get(ctx, key, statelog.ReadOptions{Consistent: true})
	}
	if errors.Is(err, statelog.ErrNotFound) {
		return nil, errors.New(k.Singular + " " + namespace + "/" + ref.Name + " named by the token is gone")
	}
	if err != nil {
		return nil, err
	}
	stored, err := logvalue.Meta(e.Value)
	if err != nil {
		return nil, err
	}
	if string(stored.UID) != ref.UID {
		return nil, errors.New(k.Singular + " " + namespace + "/" + ref.Name + " named by the token was replaced (another uid)")
	}
	return stored, nil
}
