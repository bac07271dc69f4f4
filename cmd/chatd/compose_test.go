package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// deploy/compose.yaml runs three nodes behind one load balancer, and
// docs/operations.md says what the nodes of a cluster must share: one
// CHAT_JWT_SECRET (a token minted for one node is checked by another) and
// one CHAT_VAPID_PRIVATE_KEY (a browser subscribes to Web Push with the
// public key of the node that served the page; a push signed by another
// node's key is refused by the push service). The file set the secret
// but no VAPID key, so each node generated its own in its own data dir,
// and Web Push worked only when the node that sent a push was the one
// that had served the subscription.
func TestTheComposeClusterGivesEveryNodeTheKeysTheNodesOfAClusterMustShare(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	nodes, ids := 0, map[string]bool{}
	shared := map[string]string{}
	for name, svc := range doc.Services {
		if !strings.HasPrefix(svc.Image, "chatd") {
			continue
		}
		nodes++
		ids[svc.Environment["CHAT_NODE_ID"]] = true
		for _, k := range []string{"CHAT_JWT_SECRET", "CHAT_VAPID_PRIVATE_KEY"} {
			v := svc.Environment[k]
			if v == "" {
				t.Errorf("%s: %s is not set: each node would use a key of its own", name, k)
				continue
			}
			if prev, ok := shared[k]; ok && prev != v {
				t.Errorf("%s: %s is %q, another node's %q", name, k, v, prev)
			}
			shared[k] = v
		}
	}
	if nodes < 2 || len(ids) != nodes {
		t.Fatalf("%d chatd nodes with %d distinct CHAT_NODE_IDs in deploy/compose.yaml", nodes, len(ids))
	}
}
