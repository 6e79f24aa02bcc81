package statelog

import (
	"errors"
	"strings"
)

// Keys are "/"-separated paths; every path token becomes one subject token.
// Bytes outside [A-Za-z0-9_-] are written as %XX (uppercase hex), so '.',
// '*', '>', whitespace and non-printables never reach a subject. The
// encoding is canonical (one token per key token), which makes it reversible
// and lets decodeToken reject anything encodeToken would not produce.

var errBadKey = errors.New("statelog: invalid key")

const hexDigits = "0123456789ABCDEF"

func plainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func encodeToken(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !plainByte(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plainByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func decodeToken(t string) (string, error) {
	if t == "" {
		return "", errBadKey
	}
	if !strings.Contains(t, "%") {
		for i := 0; i < len(t); i++ {
			if !plainByte(t[i]) {
				return "", errBadKey
			}
		}
		return t, nil
	}
	b := make([]byte, 0, len(t))
	for i := 0; i < len(t); i++ {
		c := t[i]
		if plainByte(c) {
			b = append(b, c)
			continue
		}
		if c != '%' || i+2 >= len(t) {
			return "", errBadKey
		}
		hi, ok1 := unhex(t[i+1])
		lo, ok2 := unhex(t[i+2])
		v := hi<<4 | lo
		if !ok1 || !ok2 || plainByte(v) {
			return "", errBadKey
		}
		b = append(b, v)
		i += 2
	}
	return string(b), nil
}

// keySubject maps a key onto the subject under base (e.g. "state.k").
func keySubject(base, key string) (string, error) {
	if key == "" {
		return "", errBadKey
	}
	toks := strings.Split(key, "/")
	var b strings.Builder
	b.Grow(len(base) + len(key) + 8)
	b.WriteString(base)
	for _, tok := range toks {
		if tok == "" {
			return "", errBadKey
		}
		b.WriteByte('.')
		b.WriteString(encodeToken(tok))
	}
	return b.String(), nil
}

// subjectKey is the inverse of keySubject; base must include no trailing dot.
func subjectKey(base, subj string) (string, error) {
	if len(subj) <= len(base)+1 || subj[:len(base)] != base || subj[len(base)] != '.' {
		return "", errBadKey
	}
	toks := strings.Split(subj[len(base)+1:], ".")
	for i, t := range toks {
		k, err := decodeToken(t)
		if err != nil {
			return "", err
		}
		toks[i] = k
	}
	return strings.Join(toks, "/"), nil
}
