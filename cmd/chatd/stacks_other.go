//go:build !unix

package main

// reexecWithSmallStacks does nothing where exec cannot replace the process
// image: chatd runs with the runtime's default stack start.
func reexecWithSmallStacks() {}
