// Package shrink gives back the room a Go map grew to once it holds far
// fewer entries.
//
// A Go map never shrinks: deleting every entry keeps the table it grew to.
// chatd's per-connection indexes (the hub's sessions, presence, the
// per-user connection record) grow to the node's peak of online clients, so
// after a reconnect storm or a mass disconnect they would hold that peak's
// memory for as long as the process lives. Map copies such a map into one
// sized for what it holds.
//
// # Concurrency
//
// Map and the peak it updates belong to the caller: call it under the
// same lock that guards the map.
package shrink
