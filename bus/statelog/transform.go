package statelog

import "fmt"

// Transformer turns a key's value into the bytes the stream stores and back, as
// kube-apiserver's storage transformers do for etcd: encryption at rest. A Log with one
// writes stored bytes and keeps plaintext in its view, so every reader of that Log (watch
// cache, informers of the same process) sees plaintext while the stream holds ciphertext.
// FromStorage must accept values written before the transformer existed (pass them through);
// stale says the stored form is not what ToStorage writes now (plaintext, an old key), so an
// unchanged object should still be written again (Log.Stale), as kube-apiserver does.
type Transformer interface {
	ToStorage(key string, value []byte) ([]byte, error)
	FromStorage(key string, stored []byte) (value []byte, stale bool, err error)
}

func (l *Log) toStorage(key string, value []byte) ([]byte, error) {
	if l.cfg.Transformer == nil || key == "" || value == nil {
		return value, nil
	}
	out, err := l.cfg.Transformer.ToStorage(key, value)
	if err != nil {
		return nil, fmt.Errorf("statelog: transform %s: %w", key, err)
	}
	return out, nil
}

// fromStorage keeps the stored bytes when they cannot be turned back (a key the Log does not
// hold): the reader's decode then fails on that object alone, and the error is recorded.
func (l *Log) fromStorage(key string, stored []byte, del bool) []byte {
	if l.cfg.Transformer == nil {
		return stored
	}
	if del {
		l.stale.Delete(key)
		return stored
	}
	out, stale, err := l.cfg.Transformer.FromStorage(key, stored)
	if err != nil {
		l.errMu.Lock()
		l.lastErr = fmt.Errorf("statelog: transform %s: %w", key, err)
		l.errMu.Unlock()
		return stored
	}
	if stale {
		l.stale.Store(key, true)
	} else {
		l.stale.Delete(key)
	}
	return out
}

// Stale reports whether key's live value is stored in a form the Transformer no longer
// writes (plaintext from before encryption, an old key): a write of it is due even when the
// object is unchanged.
func (l *Log) Stale(key string) bool {
	_, ok := l.stale.Load(key)
	return ok
}
