package client

// InjectEvent feeds a raw events-topic payload to the dispatcher, as if it
// had arrived from chatd: the seam of the de-duplication test.
func (c *Client) InjectEvent(payload []byte) { c.disp.enqueue(payload) }

// DropEvents makes the client drop events-topic payloads for which drop
// returns true, as a lossy path would (nil stops dropping).
func (c *Client) DropEvents(drop func(payload []byte) bool) {
	if drop == nil {
		c.dropEvent.Store(nil)
		return
	}
	c.dropEvent.Store(&drop)
}
