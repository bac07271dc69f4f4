package httpapi

import "time"

// SetTransferIdle sets how long an upload or a download may move no byte
// before it is ended (60 s in chatd).
func SetTransferIdle(a *API, d time.Duration) { a.transferIdle = d }
