package httpapi

import "time"

// SetTransferIdle sets how long an upload may take to deliver 16 KiB,
// or a download's client to take 4 KiB, before it is ended (60 s in
// chatd).
func SetTransferIdle(a *API, d time.Duration) { a.transferIdle = d }
