// Package authparam reads the comma-separated key=value lists that
// authorization schemes carry after their name: AWS SigV4's
// "Credential=…, SignedHeaders=…, Signature=…" and VAPID's "t=…, k=…".
package authparam

import "strings"

// Parse splits list at commas and each part at its first '=', trimming the
// space around parts. A part without '=' maps to ""; a repeated key keeps
// its last value, as the loops it replaces did.
func Parse(list string) map[string]string {
	params := make(map[string]string)
	for _, part := range strings.Split(list, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		params[k] = v
	}
	return params
}
