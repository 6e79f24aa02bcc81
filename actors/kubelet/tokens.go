package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// Projected service account tokens are requested from the TokenRequest API as the node, bound
// to their pod, and kept until 80% of their lifetime or 24 hours have passed, as kubelet's
// token manager does: the volume resync asks every few seconds and must not mint each time,
// yet the file is rotated well before the token expires.
const (
	defaultTokenSeconds = 3600
	tokenMaxAge         = 24 * time.Hour
)

type tokenKey struct {
	pod      types.UID
	account  string
	audience string
	seconds  int64
}

type cachedToken struct {
	token     []byte
	refreshAt time.Time
	expires   time.Time
}

// tokenCache is the kubelet's volumes.TokenSource.
type tokenCache struct {
	client *apiclient.Client
	now    func() time.Time

	mu     sync.Mutex
	tokens map[tokenKey]cachedToken
}

func newTokenCache(client *apiclient.Client) *tokenCache {
	return &tokenCache{client: client, now: time.Now, tokens: map[tokenKey]cachedToken{}}
}

// get returns the pod's token for src, from the cache while it is fresh.
func (c *tokenCache) get(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) ([]byte, error) {
	seconds := int64(defaultTokenSeconds)
	if src.ExpirationSeconds != nil {
		seconds = *src.ExpirationSeconds
	}
	account := pod.Spec.ServiceAccountName
	if account == "" {
		account = "default"
	}
	key := tokenKey{pod: pod.UID, account: account, audience: src.Audience, seconds: seconds}
	now := c.now()
	c.mu.Lock()
	t, ok := c.tokens[key]
	c.mu.Unlock()
	if ok && now.Before(t.refreshAt) {
		return t.token, nil
	}
	req := &authenticationv1.TokenRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenRequest"},
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds,
			BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}},
	}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	path := apiclient.Path(controllerkit.MustKind("", "serviceaccounts"), pod.Namespace, account, "token")
	out, err := c.client.Raw(ctx, http.MethodPost, path, "application/json", body)
	if err != nil {
		return nil, fmt.Errorf("token for service account %q: %w", account, err)
	}
	var resp authenticationv1.TokenRequest
	if err := json.Unmarshal(out, &resp); err != nil || resp.Status.Token == "" {
		return nil, fmt.Errorf("token for service account %q: the API's answer holds no token (%v)", account, err)
	}
	expires := resp.Status.ExpirationTimestamp.Time
	life := expires.Sub(now)
	t = cachedToken{token: []byte(resp.Status.Token), expires: expires, refreshAt: now.Add(min(life*8/10, tokenMaxAge))}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokens[key] = t
	// Tokens of pods that are gone are never asked for again: drop them once expired.
	for k, v := range c.tokens {
		if !now.Before(v.expires) {
			delete(c.tokens, k)
		}
	}
	return t.token, nil
}
