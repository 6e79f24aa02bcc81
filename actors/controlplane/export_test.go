package controlplane

import (
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/bus/identity"
)

// ClientFor is the client component role of cp calls the API through.
func ClientFor(cp *ControlPlane, role identity.Role) (*apiclient.Client, error) {
	return cp.clientFor(role)
}
