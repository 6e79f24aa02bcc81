package encryption_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/skiff-sh/skiff/actors/apiserver/encryption"
)

func keyed(t *testing.T, names ...string) *encryption.Transformer {
	t.Helper()
	var keys []encryption.Key
	for _, n := range names {
		keys = append(keys, encryption.Key{Name: n, Secret: bytes.Repeat([]byte(n[len(n)-1:]), 32)})
	}
	tr, err := encryption.New(keys, "core/secrets/")
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestSealsCoveredKeysOnly(t *testing.T) {
	tr := keyed(t, "k1")
	plain := []byte(`{"data":{"password":"aHVudGVyMg=="}}`)
	sealed, err := tr.ToStorage("core/secrets/default/db", plain)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(sealed), "skiff:enc:aesgcm:v1:k1:") || bytes.Contains(sealed, []byte("aHVudGVyMg")) {
		t.Fatalf("stored form %q is not sealed with k1", sealed)
	}
	again, _ := tr.ToStorage("core/secrets/default/db", plain)
	if bytes.Equal(again, sealed) {
		t.Fatal("two writes of one value gave one ciphertext: the nonce repeats")
	}
	got, stale, err := tr.FromStorage("core/secrets/default/db", sealed)
	if err != nil || !bytes.Equal(got, plain) || stale {
		t.Fatalf("FromStorage = %q, stale %v, %v", got, stale, err)
	}
	cm, _ := tr.ToStorage("core/configmaps/default/db", plain)
	if !bytes.Equal(cm, plain) {
		t.Fatalf("a configmap was transformed: %q", cm)
	}
}

func TestRefusesWhatDoesNotOpen(t *testing.T) {
	tr := keyed(t, "k1")
	sealed, _ := tr.ToStorage("core/secrets/a/x", []byte("v"))
	// Copied under another key: the storage key is the additional data.
	if _, _, err := tr.FromStorage("core/secrets/b/x", sealed); err == nil {
		t.Fatal("a ciphertext opened under another key")
	}
	flipped := append([]byte{}, sealed...)
	flipped[len(flipped)-1] ^= 1
	if _, _, err := tr.FromStorage("core/secrets/a/x", flipped); err == nil {
		t.Fatal("a tampered ciphertext opened")
	}
	if _, _, err := keyed(t, "other").FromStorage("core/secrets/a/x", sealed); err == nil || !strings.Contains(err.Error(), `"k1"`) {
		t.Fatalf("unknown key: err = %v, want one naming k1", err)
	}
	// Plaintext from before encryption stays readable, and is due to be sealed.
	if got, stale, err := tr.FromStorage("core/secrets/a/x", []byte(`{"a":1}`)); err != nil || string(got) != `{"a":1}` || !stale {
		t.Fatalf("plaintext: %q, stale %v, %v", got, stale, err)
	}
	if _, stale, _ := tr.FromStorage("core/configmaps/a/x", []byte(`{"a":1}`)); stale {
		t.Fatal("a configmap in plaintext is stale")
	}
}

func TestRotation(t *testing.T) {
	old := keyed(t, "k1")
	sealed, _ := old.ToStorage("core/secrets/a/x", []byte("v"))
	rotated := keyed(t, "k2", "k1") // k2 writes, k1 still reads
	if got, stale, err := rotated.FromStorage("core/secrets/a/x", sealed); err != nil || string(got) != "v" || !stale {
		t.Fatalf("old value after rotation: %q, stale %v, %v", got, stale, err)
	}
	next, _ := rotated.ToStorage("core/secrets/a/x", []byte("v"))
	if !strings.HasPrefix(string(next), "skiff:enc:aesgcm:v1:k2:") {
		t.Fatalf("rotated write %q not sealed with k2", next)
	}
}

func TestKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys", "encryption.keys")
	// Replicas starting together end up with one key.
	var wg sync.WaitGroup
	got := make([][]encryption.Key, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := encryption.LoadOrCreate(path)
			if err != nil {
				t.Error(err)
			}
			got[i] = k
		}()
	}
	wg.Wait()
	for _, k := range got[1:] {
		if len(k) != 1 || !bytes.Equal(k[0].Secret, got[0][0].Secret) {
			t.Fatal("replicas loaded different keys")
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", fi.Mode(), err)
	}
	for _, bad := range []struct{ file, want string }{
		{"k1\n", "line 1: want <name>:<base64 secret>"},
		{"k1:!!\n", `secret of key "k1"`},
		{"k1:" + "YWJj" + "\n", "3 bytes"},
		{"# only a comment\n", "no key"},
	} {
		if _, err := encryption.Parse([]byte(bad.file)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Parse(%q) = %v, want %q", bad.file, err, bad.want)
		}
	}
	if _, err := encryption.New([]encryption.Key{{Name: "a", Secret: make([]byte, 32)}, {Name: "a", Secret: make([]byte, 32)}}); err == nil {
		t.Error("a key name used twice was accepted")
	}
}
