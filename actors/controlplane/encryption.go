package controlplane

import (
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/skiff-sh/skiff/actors/apiserver/encryption"
	"github.com/skiff-sh/skiff/bus/statelog"
)

// encryptedPrefixes are the storage keys sealed at rest: Secrets, as Kubernetes'
// EncryptionConfiguration is usually written.
var encryptedPrefixes = []string{"core/secrets/"}

// EncryptionKeyFileName is the key file under DataDir when Config.EncryptionKeyFile is empty.
const EncryptionKeyFileName = "encryption.keys"

// secretsTransformer is the apiserver's storage transformer: the key file given, else the
// one in the data dir (both made on first start). A process without an apiserver holds no
// key. An in-memory control plane gets a key that lives as long as its log does. On an
// external NATS the file must be given: replicas each making their own in their data dirs
// could not read each other's Secrets.
func (c Config) secretsTransformer() (statelog.Transformer, error) {
	if !c.Runs(APIServer) {
		return nil, nil
	}
	path := c.EncryptionKeyFile
	var keys []encryption.Key
	switch {
	case path == "" && c.NATSURL != "":
		return nil, errors.New("EncryptionKeyFile (--encryption-key-file): an apiserver on an external NATS needs the key file every replica shares (made on first start)")
	case path == "" && c.DataDir != "":
		path = filepath.Join(c.DataDir, EncryptionKeyFileName)
	case path == "":
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
		keys = []encryption.Key{{Name: "memory", Secret: secret}}
	}
	if path != "" {
		var err error
		if keys, err = encryption.LoadOrCreate(path); err != nil {
			return nil, fmt.Errorf("encryption key file: %w", err)
		}
	}
	t, err := encryption.New(keys, encryptedPrefixes...)
	if err != nil {
		return nil, err
	}
	return t, nil
}
