package authn

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A token added to or revoked from the file takes effect without a restart; a broken edit
// keeps the last good tokens.
func TestTokenFileReloadsOnChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	write := func(s string, mod time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		// A distinct mtime per edit: two writes within the clock's granularity look alike.
		if err := os.Chtimes(path, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now().Add(-time.Hour)
	write("a,alice,u1\n", t0)
	f, err := OpenTokenFile(path, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	has := func(tok string) bool { _, ok := f.Lookup(context.Background(), tok); return ok }
	if !has("a") || has("b") {
		t.Fatal("initial tokens wrong")
	}
	write("b,bob,u2\n", t0.Add(time.Second))
	if has("a") || !has("b") {
		t.Fatal("edit not picked up: a revoked token still works or a new one does not")
	}
	write("c,,u3\n", t0.Add(2*time.Second)) // no user: does not parse
	if !has("b") || has("c") {
		t.Fatal("a file that does not parse replaced the tokens in force")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if !has("b") {
		t.Fatal("a removed file dropped the tokens in force")
	}
	if _, err := OpenTokenFile(path, 0, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("opening a missing token file succeeded")
	}
}
