// Package encryption keeps Secrets encrypted at rest in the state log, as kube-apiserver's
// EncryptionConfiguration `aesgcm` provider does in etcd: every stored value of an encrypted
// resource is "skiff:enc:aesgcm:v1:<key name>:" + a random 12-byte nonce + the AES-GCM
// sealed object, with the value's storage key as additional data (so a ciphertext moved to
// another key does not open). Only the apiserver holds the keys; everyone else reading the
// stream sees ciphertext.
package encryption

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
)

// prefix starts every encrypted value; the key name and a ':' follow.
const prefix = "skiff:enc:aesgcm:v1:"

// Key is one named AES key (16, 24 or 32 bytes).
type Key struct {
	Name   string
	Secret []byte
}

// Transformer encrypts the values under its key prefixes with the first key and decrypts with
// whichever key a value names, so keys rotate by putting a new one first. Values without the
// prefix (written before encryption existed) are returned as they are and encrypted when next
// written. It implements statelog.Transformer.
type Transformer struct {
	prefixes []string
	write    string
	aeads    map[string]cipher.AEAD
}

// New returns the transformer of keys (the first one writes) for storage keys starting with
// any of prefixes ("core/secrets/").
func New(keys []Key, prefixes ...string) (*Transformer, error) {
	if len(keys) == 0 {
		return nil, errors.New("encryption: no key")
	}
	t := &Transformer{prefixes: prefixes, write: keys[0].Name, aeads: map[string]cipher.AEAD{}}
	for i, k := range keys {
		if err := validName(k.Name); err != nil {
			return nil, fmt.Errorf("encryption: key %d: %w", i, err)
		}
		if _, dup := t.aeads[k.Name]; dup {
			return nil, fmt.Errorf("encryption: key %d: name %q used twice", i, k.Name)
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("encryption: key %q: %w", k.Name, err)
		}
		if t.aeads[k.Name], err = cipher.NewGCM(block); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func validName(name string) error {
	if name == "" {
		return errors.New("name is empty")
	}
	if strings.ContainsAny(name, ": \t\r\n") {
		return fmt.Errorf("name %q may not contain ':' or spaces", name)
	}
	return nil
}

func (t *Transformer) covers(key string) bool {
	for _, p := range t.prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// ToStorage seals value for key when key is under one of the prefixes.
func (t *Transformer) ToStorage(key string, value []byte) ([]byte, error) {
	if !t.covers(key) {
		return value, nil
	}
	aead := t.aeads[t.write]
	head := prefix + t.write + ":"
	out := make([]byte, len(head)+aead.NonceSize(), len(head)+aead.NonceSize()+len(value)+aead.Overhead())
	copy(out, head)
	nonce := out[len(head):]
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(out, nonce, value, []byte(key)), nil
}

// FromStorage opens a sealed value; a value without the prefix is plaintext from before
// encryption and is returned unchanged. stale: the value is not sealed with the writing key
// (plaintext under a covered key, or an older key), so it is due to be written again.
func (t *Transformer) FromStorage(key string, stored []byte) ([]byte, bool, error) {
	rest, ok := bytes.CutPrefix(stored, []byte(prefix))
	if !ok {
		return stored, t.covers(key), nil
	}
	name, sealed, ok := bytes.Cut(rest, []byte(":"))
	if !ok {
		return nil, false, errors.New("encryption: stored value has no key name")
	}
	aead, ok := t.aeads[string(name)]
	if !ok {
		return nil, false, fmt.Errorf("encryption: stored value is sealed with key %q, which this server does not hold", name)
	}
	if len(sealed) < aead.NonceSize() {
		return nil, false, errors.New("encryption: stored value is too short")
	}
	nonce, ct := sealed[:aead.NonceSize()], sealed[aead.NonceSize():]
	plain, err := aead.Open(nil, nonce, ct, []byte(key))
	if err != nil {
		return nil, false, fmt.Errorf("encryption: stored value does not open with key %q: %w", name, err)
	}
	return plain, string(name) != t.write, nil
}

// Encrypted reports whether stored is a sealed value (for tests and diagnostics).
func Encrypted(stored []byte) bool { return bytes.HasPrefix(stored, []byte(prefix)) }
