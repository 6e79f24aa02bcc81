package authn

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// TokenLookup finds the user a bearer token stands for.
type TokenLookup interface {
	// Lookup may read the audiences the token is checked for from ctx (AudiencesFrom).
	Lookup(ctx context.Context, token string) (User, bool)
}

// TokenFile is a token file that is reloaded when it changes, so adding or revoking a token
// needs no restart. The file is checked at most once per CheckEvery; a file that no longer
// parses keeps the last good tokens in force and the error is logged.
type TokenFile struct {
	path       string
	checkEvery time.Duration
	logger     *slog.Logger

	tokens atomic.Pointer[Tokens]
	mu     sync.Mutex // one reload at a time
	stamp  fileStamp
	next   atomic.Int64 // unix nanos of the next check
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// DefaultTokenCheck is how often a token file is looked at for changes.
const DefaultTokenCheck = time.Second

// OpenTokenFile loads path; errors name the file, line and field.
func OpenTokenFile(path string, checkEvery time.Duration, logger *slog.Logger) (*TokenFile, error) {
	f := &TokenFile{path: path, checkEvery: checkEvery, logger: logger}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	t, err := LoadTokens(path)
	if err != nil {
		return nil, err
	}
	f.tokens.Store(t)
	f.stamp = stampOf(st)
	f.next.Store(time.Now().Add(checkEvery).UnixNano())
	return f, nil
}

func stampOf(st os.FileInfo) fileStamp { return fileStamp{mod: st.ModTime(), size: st.Size()} }

// Lookup reloads the file if it changed since the last check, then looks the token up.
func (f *TokenFile) Lookup(ctx context.Context, token string) (User, bool) {
	if now := time.Now().UnixNano(); now >= f.next.Load() {
		f.reload(now)
	}
	return f.tokens.Load().Lookup(ctx, token)
}

func (f *TokenFile) reload(now int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now < f.next.Load() {
		return // another request reloaded meanwhile
	}
	f.next.Store(now + f.checkEvery.Nanoseconds())
	st, err := os.Stat(f.path)
	if err != nil {
		f.logger.Warn("token file unreadable; keeping the tokens loaded before", "file", f.path, "err", err)
		return
	}
	if stampOf(st) == f.stamp {
		return
	}
	t, err := LoadTokens(f.path)
	if err != nil {
		f.logger.Warn("token file changed but does not parse; keeping the tokens loaded before", "err", err)
		return
	}
	f.stamp = stampOf(st)
	f.tokens.Store(t)
	f.logger.Info("token file reloaded", "file", f.path, "tokens", t.Len())
}
