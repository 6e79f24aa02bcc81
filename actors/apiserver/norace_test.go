//go:build !race

package apiserver_test

import "time"

// patchAnswerWithin is how soon a bounded patch must be refused (issue 13: within a second).
const patchAnswerWithin = time.Second
