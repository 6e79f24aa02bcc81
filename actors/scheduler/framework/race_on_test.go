//go:build race

package framework

// raceEnabled: the race detector slows the benchmark cluster tenfold.
const raceEnabled = true
