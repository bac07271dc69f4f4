//go:build !race

package hooks

const raceEnabled = false
