package store

import "sync"

// maxUnpublished bounds the changes unpublished remembers: a few full
// batches' worth, more than the connections that die at once lose.
const maxUnpublished = 4096

// unpublished remembers the changes (conversation, clientMsgId) of the
// send batches this node answered with a failure whose outcome it could
// not learn: PostgreSQL may have committed them, and then their entries
// were never handed to the publisher. A resend of one that answers its
// first outcome (a duplicate, a recall made already) is published then,
// once. Any other resend is not: its first publishing is not in doubt,
// and published again an old entry would go to every member session of
// the conversation (each of a large group's), where a fresh session (a
// clean one that has queued nothing of it yet) takes an old seq routed
// to it for an entry routed late and starts over from it, replaying the
// conversation from before its client connected (delivery,
// stream.rewound). The oldest are forgotten past maxUnpublished: such a
// message then reaches this node's sessions when a later entry of its
// conversation exposes the gap or they reconnect, as when no resend
// comes. A resend that reaches another node is not published there: that
// node has the entry from Kafka (the node that committed it does not
// read its own).
type unpublished struct {
	mu    sync.Mutex
	gen   uint64
	keys  map[changeKey]uint64 // the generation it was added in
	order []keyGen             // oldest first
}

type changeKey struct {
	conv int64
	id   string
}

type keyGen struct {
	key changeKey
	gen uint64
}

// add remembers reqs' changes.
func (u *unpublished) add(reqs []*sendReq) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.keys == nil {
		u.keys = map[changeKey]uint64{}
	}
	for _, r := range reqs {
		u.gen++
		k := changeKey{r.req.ConversationID, r.req.ClientMsgID}
		u.keys[k] = u.gen
		u.order = append(u.order, keyGen{k, u.gen})
	}
	for len(u.order) > maxUnpublished {
		old := u.order[0]
		u.order = u.order[1:]
		if u.keys[old.key] == old.gen {
			delete(u.keys, old.key)
		}
	}
}

// take reports whether the change clientMsgId of conv is remembered, and
// forgets it.
func (u *unpublished) take(conv int64, id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	k := changeKey{conv, id}
	if _, ok := u.keys[k]; !ok {
		return false
	}
	delete(u.keys, k)
	return true
}
