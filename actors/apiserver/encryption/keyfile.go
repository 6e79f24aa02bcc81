package encryption

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A key file holds one key a line, "<name>:<base64 secret>", the writing key first; blank
// lines and lines starting with '#' are skipped. It is 0600 and must never leave the hosts
// that run the apiserver.

// LoadOrCreate reads the key file at path, writing a new one with one random 32-byte key first
// when none exists. Replicas given the same path on shared storage race safely: the file
// appears complete or not at all (written aside, then linked into place).
func LoadOrCreate(path string) ([]Key, error) {
	keys, err := Load(path)
	if !errors.Is(err, os.ErrNotExist) {
		return keys, err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".encryption-key-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	line := "key1:" + base64.StdEncoding.EncodeToString(secret) + "\n"
	if _, err := tmp.WriteString(line); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	return Load(path) // ours, or the one another replica linked first
}

// Load reads a key file.
func Load(path string) ([]Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	keys, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return keys, nil
}

// Parse reads the key file format.
func Parse(data []byte) ([]Key, error) {
	var keys []Key
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, b64, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("line %d: want <name>:<base64 secret>", n)
		}
		secret, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("line %d: secret of key %q: %w", n, name, err)
		}
		if l := len(secret); l != 16 && l != 24 && l != 32 {
			return nil, fmt.Errorf("line %d: secret of key %q is %d bytes; AES-GCM takes 16, 24 or 32", n, name, l)
		}
		if err := validName(name); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		keys = append(keys, Key{Name: name, Secret: secret})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("no key")
	}
	return keys, nil
}
