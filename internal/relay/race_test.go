//go:build race

package relay_test

// raceEnabled: the test binary runs under the race detector.
const raceEnabled = true
