//go:build race

package chat_test

// raceEnabled: the race detector allocates on its own and sync.Pool drops
// items at random under it, so allocation counts mean nothing.
const raceEnabled = true
