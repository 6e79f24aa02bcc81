package identity

import (
	"github.com/nats-io/nats.go"

	"github.com/skiff-sh/skiff/bus/natsserver"
)

// Creds mints id's credentials (a .creds file's content) signed by auth.
func Creds(auth *natsserver.Auth, id ID, n Names) ([]byte, error) {
	p, err := id.Permissions(n)
	if err != nil {
		return nil, err
	}
	return auth.Creds(id.String(), p)
}

// ClientOptions are the connection options every client of identity id needs: its private
// inbox (replies arrive where its permissions let it subscribe).
func (id ID) ClientOptions() []nats.Option {
	return []nats.Option{nats.CustomInboxPrefix(id.InboxPrefix())}
}

// Connect opens a connection to srv authenticated as id with freshly minted credentials
// (in-process components of a secured server).
func Connect(srv *natsserver.Server, auth *natsserver.Auth, id ID, n Names, opts ...nats.Option) (*nats.Conn, error) {
	p, err := id.Permissions(n)
	if err != nil {
		return nil, err
	}
	creds, err := auth.ConnectOption(id.String(), p)
	if err != nil {
		return nil, err
	}
	return srv.Connect(append(append(id.ClientOptions(), creds), opts...)...)
}
