//go:build race

package apiserver_test

import "time"

// The race detector slows JSON work about fourfold; the non-race run holds the real bound.
const patchAnswerWithin = 3 * time.Second
