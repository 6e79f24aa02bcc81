package serviceaccount

import (
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
)

// Ref names a bound object.
type Ref struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// Claims are what a ServiceAccount token says.
type Claims struct {
	Issuer         string
	Audiences      []string
	IssuedAt       time.Time
	Expiry         time.Time
	ID             string // jti: the credential id kube reports as authentication.kubernetes.io/credential-id
	Namespace      string
	ServiceAccount Ref
	Pod            *Ref // bound to a pod
	Secret         *Ref // bound to a Secret
	Node           *Ref // the node of the bound pod
}

// privateClaims is kube-apiserver's kubernetes.io claim.
type privateClaims struct {
	Kubernetes struct {
		Namespace      string `json:"namespace,omitempty"`
		ServiceAccount Ref    `json:"serviceaccount,omitempty"`
		Pod            *Ref   `json:"pod,omitempty"`
		Secret         *Ref   `json:"secret,omitempty"`
		Node           *Ref   `json:"node,omitempty"`
	} `json:"kubernetes.io"`
}

// UserPrefix + "<ns>:<name>" is an account's user name.
const UserPrefix = "system:serviceaccount:"

// UserName is the user an account authenticates as.
func UserName(namespace, name string) string { return UserPrefix + namespace + ":" + name }

func (c Claims) public() jwt.Claims {
	return jwt.Claims{
		Issuer: c.Issuer, Subject: UserName(c.Namespace, c.ServiceAccount.Name), Audience: jwt.Audience(c.Audiences),
		IssuedAt: jwt.NewNumericDate(c.IssuedAt), NotBefore: jwt.NewNumericDate(c.IssuedAt), Expiry: jwt.NewNumericDate(c.Expiry),
		ID: c.ID,
	}
}

func (c Claims) private() privateClaims {
	var p privateClaims
	k := &p.Kubernetes
	k.Namespace, k.ServiceAccount, k.Pod, k.Secret, k.Node = c.Namespace, c.ServiceAccount, c.Pod, c.Secret, c.Node
	return p
}

func claimsOf(pub jwt.Claims, priv privateClaims) *Claims {
	k := priv.Kubernetes
	c := &Claims{Issuer: pub.Issuer, Audiences: []string(pub.Audience), ID: pub.ID, Namespace: k.Namespace,
		ServiceAccount: k.ServiceAccount, Pod: k.Pod, Secret: k.Secret, Node: k.Node}
	if pub.IssuedAt != nil {
		c.IssuedAt = pub.IssuedAt.Time()
	}
	if pub.Expiry != nil {
		c.Expiry = pub.Expiry.Time()
	}
	return c
}
