package natsserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Account is the one account Skiff's components share; JetStream is enabled in it.
const Account = "SKIFF"

// Auth is the decentralized (JWT) security of a server: an operator that signs one JetStream
// account and a system account, held in a memory resolver. Users are signed by the account key,
// so credentials for a new node are minted without touching (or reloading) the server.
type Auth struct {
	operator, account, system          nkeys.KeyPair
	operatorJWT, accountJWT, systemJWT string
	accountPub, systemPub, operatorPub string
}

// Permissions limit what one user may do. Empty Pub/Sub allow lists allow everything; deny
// lists win over allow lists. Respond lets the user answer requests it received (reply
// subjects) without a publish grant on them.
type Permissions struct {
	PubAllow, PubDeny []string
	SubAllow, SubDeny []string
	Respond           bool
	Limits            Limits
}

// Limits bound each connection of one user; zero fields are unlimited. NATS enforces
// subscriptions and payload per user connection (a user JWT's limits); connections and
// JetStream resources it bounds per account only.
type Limits struct {
	Subs    int64 // subscriptions at once
	Payload int64 // largest message published, bytes
}

// respondWindow bounds how long after a request its reply may be sent (exec runs long).
const respondWindow = time.Hour

var seedFiles = []struct {
	name   string
	create func() (nkeys.KeyPair, error)
}{
	{"operator.nk", nkeys.CreateOperator},
	{"account.nk", nkeys.CreateAccount},
	{"system.nk", nkeys.CreateAccount},
}

// LoadAuth reads the operator and account keys from dir, creating them (0600) on first use, so
// credentials minted earlier stay valid across restarts.
func LoadAuth(dir string) (*Auth, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return loadAuth(dir, true)
}

// ReadAuth reads keys LoadAuth created, to mint credentials away from the server.
func ReadAuth(dir string) (*Auth, error) { return loadAuth(dir, false) }

func loadAuth(dir string, create bool) (*Auth, error) {
	var kps [3]nkeys.KeyPair
	for i, f := range seedFiles {
		mk := f.create
		if !create {
			mk = nil
		}
		kp, err := loadOrCreateSeed(filepath.Join(dir, f.name), mk)
		if err != nil {
			return nil, fmt.Errorf("natsserver: %s: %w", f.name, err)
		}
		kps[i] = kp
	}
	a := &Auth{operator: kps[0], account: kps[1], system: kps[2]}
	var err error
	if a.operatorPub, err = a.operator.PublicKey(); err != nil {
		return nil, err
	}
	if a.accountPub, err = a.account.PublicKey(); err != nil {
		return nil, err
	}
	if a.systemPub, err = a.system.PublicKey(); err != nil {
		return nil, err
	}
	oc := jwt.NewOperatorClaims(a.operatorPub)
	oc.Name = "skiff"
	oc.SystemAccount = a.systemPub
	if a.operatorJWT, err = oc.Encode(a.operator); err != nil {
		return nil, err
	}
	ac := jwt.NewAccountClaims(a.accountPub)
	ac.Name = Account
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	if a.accountJWT, err = ac.Encode(a.operator); err != nil {
		return nil, err
	}
	sc := jwt.NewAccountClaims(a.systemPub)
	sc.Name = "SYS"
	if a.systemJWT, err = sc.Encode(a.operator); err != nil {
		return nil, err
	}
	return a, nil
}

func loadOrCreateSeed(path string, create func() (nkeys.KeyPair, error)) (nkeys.KeyPair, error) {
	seed, err := os.ReadFile(path)
	if err == nil {
		return nkeys.FromSeed(seed)
	}
	if !errors.Is(err, os.ErrNotExist) || create == nil {
		return nil, err
	}
	kp, err := create()
	if err != nil {
		return nil, err
	}
	if seed, err = kp.Seed(); err != nil {
		return nil, err
	}
	// O_EXCL: two processes starting on one data dir must not both write a key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return loadOrCreateSeed(path, create)
	}
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(seed); err != nil {
		f.Close()
		return nil, err
	}
	return kp, f.Close()
}

// configure puts the server into operator mode with the account and system account preloaded.
func (a *Auth) configure(o *server.Options) error {
	oc, err := jwt.DecodeOperatorClaims(a.operatorJWT)
	if err != nil {
		return err
	}
	res := &server.MemAccResolver{}
	if err := res.Store(a.accountPub, a.accountJWT); err != nil {
		return err
	}
	if err := res.Store(a.systemPub, a.systemJWT); err != nil {
		return err
	}
	o.TrustedOperators = []*jwt.OperatorClaims{oc}
	o.AccountResolver = res
	o.SystemAccount = a.systemPub
	return nil
}

// User signs credentials for one user of the account and returns its JWT and nkey seed.
func (a *Auth) User(name string, p Permissions) (userJWT string, seed []byte, err error) {
	if name == "" {
		return "", nil, errors.New("natsserver: user name is required")
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", nil, err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return "", nil, err
	}
	uc := jwt.NewUserClaims(pub)
	uc.Name = name
	uc.IssuerAccount = "" // signed by the account's own key
	uc.Pub.Allow, uc.Pub.Deny = p.PubAllow, p.PubDeny
	uc.Sub.Allow, uc.Sub.Deny = p.SubAllow, p.SubDeny
	if p.Limits.Subs > 0 {
		uc.Limits.Subs = p.Limits.Subs
	}
	if p.Limits.Payload > 0 {
		uc.Limits.Payload = p.Limits.Payload
	}
	if p.Respond {
		uc.Resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: respondWindow}
	}
	if userJWT, err = uc.Encode(a.account); err != nil {
		return "", nil, err
	}
	if seed, err = kp.Seed(); err != nil {
		return "", nil, err
	}
	return userJWT, seed, nil
}

// Creds returns a user's credentials in the .creds file format nats.UserCredentials reads.
func (a *Auth) Creds(name string, p Permissions) ([]byte, error) {
	userJWT, seed, err := a.User(name, p)
	if err != nil {
		return nil, err
	}
	return jwt.FormatUserConfig(userJWT, seed)
}

// ConnectOption authenticates an (in-process or TCP) connection as a freshly minted user.
func (a *Auth) ConnectOption(name string, p Permissions) (nats.Option, error) {
	userJWT, seed, err := a.User(name, p)
	if err != nil {
		return nil, err
	}
	return nats.UserJWTAndSeed(userJWT, string(seed)), nil
}
