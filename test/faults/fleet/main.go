// Command fleet runs package internal/fleet over stdin and stdout: the
// fault tests' crowd of phones, built without the race detector.
package main

import (
	"fmt"
	"os"

	"github.com/chatd/chatd/internal/fleet"
)

func main() {
	if err := fleet.Run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(2)
	}
}
