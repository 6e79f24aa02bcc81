package main

import (
	"os"
	"runtime/debug"
)

// defaultGCPercent makes percent the process's GOGC unless the environment sets one (the
// runtime has then applied it already): a command whose heap is unlike most sets its own.
func defaultGCPercent(percent int) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(percent)
	}
}
