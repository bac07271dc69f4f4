//go:build race

package faults_test

// raceEnabled: the test binary runs under the race detector, which slows
// the test's own clients (not chatd subprocesses) several times.
const raceEnabled = true
