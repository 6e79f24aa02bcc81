package authn

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Token is one line of a static token file.
type Token struct {
	User User
	UID  string
	hash [sha256.Size]byte // of the token; the token itself is not kept
}

// Tokens authenticates bearer tokens from Kubernetes' static token file format:
// token,user,uid[,"group1,group2"]. Lookups compare against every entry in constant time, so
// response timing says nothing about how much of a guess was right.
type Tokens struct {
	entries []Token
}

// ParseTokens reads a token file. Errors name the line and the field.
func ParseTokens(r io.Reader) (*Tokens, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	t := &Tokens{}
	seen := map[[sha256.Size]byte]bool{}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return t, nil
		}
		if err != nil {
			return nil, fmt.Errorf("token file: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) < 3 {
			return nil, fmt.Errorf("token file line %d: want token,user,uid[,groups], got %d fields", line, len(rec))
		}
		tok, name, uid := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1]), strings.TrimSpace(rec[2])
		switch {
		case tok == "":
			return nil, fmt.Errorf("token file line %d: token: must not be empty", line)
		case strings.ContainsAny(tok, " \t"):
			return nil, fmt.Errorf("token file line %d: token: must not contain spaces", line)
		case name == "":
			return nil, fmt.Errorf("token file line %d: user: must not be empty", line)
		}
		var groups []string
		if len(rec) > 3 {
			for _, g := range strings.Split(rec[3], ",") {
				if g = strings.TrimSpace(g); g != "" {
					groups = append(groups, g)
				}
			}
		}
		h := sha256.Sum256([]byte(tok))
		if seen[h] {
			return nil, fmt.Errorf("token file line %d: token: duplicate of an earlier line", line)
		}
		seen[h] = true
		t.entries = append(t.entries, Token{User: withAuthenticated(User{Name: name, UID: uid, Groups: groups}), UID: uid, hash: h})
	}
}

// LoadTokens reads the token file at path.
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return t, nil
}

// Len is the number of tokens.
func (t *Tokens) Len() int { return len(t.entries) }

// Lookup returns the user a token stands for. Static tokens name no audience: they are good
// for the API's own (TokenReview checks the rest).
func (t *Tokens) Lookup(_ context.Context, token string) (User, bool) {
	h := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.entries {
		// Every entry is compared; no early exit.
		if subtle.ConstantTimeCompare(h[:], t.entries[i].hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 || token == "" {
		return User{}, false
	}
	return t.entries[found].User, true
}

// NewToken returns a random token (256 bits, URL-safe).
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// EnsureTokenFile creates path (0600) with a new admin token in system:masters when it does not
// exist, and returns the file's admin token ("" if an existing file has none).
func EnsureTokenFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		tok := NewToken()
		line := fmt.Sprintf("%s,admin,admin,%q\n", tok, GroupMasters)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return "", err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", err
		}
		if _, err := f.WriteString(line); err != nil {
			f.Close()
			return "", err
		}
		return tok, f.Close()
	}
	if err != nil {
		return "", err
	}
	if _, err := ParseTokens(bytes.NewReader(data)); err != nil {
		return "", fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	cr := csv.NewReader(bytes.NewReader(data))
	cr.FieldsPerRecord, cr.Comment, cr.TrimLeadingSpace = -1, '#', true
	recs, _ := cr.ReadAll()
	for _, rec := range recs {
		if strings.TrimSpace(rec[1]) == "admin" {
			return strings.TrimSpace(rec[0]), nil
		}
	}
	return "", nil
}

// withAuthenticated adds system:authenticated, which every authenticated user is in.
func withAuthenticated(u User) User {
	if !u.InGroup(GroupAuthenticated) {
		u.Groups = append(append([]string(nil), u.Groups...), GroupAuthenticated)
	}
	return u
}
