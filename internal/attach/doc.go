// Package attach is chatd's attachment subsystem: chat.Attachments over a
// chat.BlobStore (the bytes) and a chat.AttachmentStore (what they are, in
// PostgreSQL). It hands out upload tickets, takes and checks the bytes,
// makes thumbnails, serves downloads and deletes what is no longer needed.
// It depends on the domain and internal/media only, never on another
// adapter: server wires the stores in.
//
// # Contract
//
//   - CreateUpload records a pending upload (member only, within the size,
//     type and bytes-per-day limits) and returns where to PUT the bytes:
//     chatd's own /v1/uploads/{id} for local disk, a presigned URL of the
//     object store otherwise (then the client POSTs completeUrl). A
//     request repeated with its key answers the first upload's ticket
//     (RetriedUpload): nothing new is recorded or charged. The bytes'
//     PUT and completion are refused as a new ticket would be once the
//     uploader may no longer upload into the conversation (writable, the
//     store's UploadAccess): the upload stays as it was, to expire.
//   - The bytes are checked before an upload is complete: exactly the
//     declared size, a type sniffed from the first bytes that is allowed
//     and agrees with the declared one, an image's pixels within the limit
//     (a decompression bomb is refused from its header, never decoded).
//     Location data is removed from the stored original (JPEG, PNG, WebP,
//     GIF, MP4/MOV/3GP/M4A, HEIF, WebM/Matroska:
//     media.Strip, the whole file; a GPS telemetry track in a video's
//     mdat is media and stays) before it is hashed, so the sha256 members see
//     is of the bytes they get. With an object store the checked bytes are
//     copied, as they are read, to a key of chatd's own: the upload URL
//     stays valid until it expires, and what is PUT to it after the check
//     is never served (its key is queued for deletion in the transaction
//     that completes the upload, due the URL's lifetime and a clock skew
//     after its expiry, urlGrace: the store checks the expiry by its own
//     clock, and stores a PUT begun before it when its last byte comes;
//     so is a refused or expired upload's). The copy is queued
//     for deletion after the TTL before it is written, and taken back by
//     that transaction: a crash in between orphans nothing. A refusal deletes the upload and queues its
//     blob; a PUT cut short, or a read or write the blob store failed
//     (storeReader tells a store's failure from a file that ends early),
//     keeps the upload pending, to be sent again.
//   - chatd's PUT streams: a head of up to 256 KiB is held to sniff it
//     (read into a buffer grown as the bytes come: a PUT that stalls
//     holds what it received), then the
//     file goes to the blob store through media.Strip (which walks all of
//     it, holding one metadata segment at a time), never the whole file
//     in memory. A new PUT of the same upload interrupts one still running.
//     A node runs at most PutsPerUser PUTs of one user at once, another
//     upload's PUT beyond them is rate_limited before a byte is read:
//     tickets alone would let a slow client hold thousands.
//   - A send checks its uploads inside its own transaction
//     (chat_send_batch); nothing here is on the send path.
//   - An avatar upload (chat.PurposeAvatar) has no conversation, is one
//     of the allowed types chatd decodes (media.DecodableTypes: it gets a
//     thumbnail and every client shows it) and at most
//     Limits.MaxAvatarBytes; otherwise it travels as any upload. The profile or group write that uses it, and releases the
//     one it replaces, is the store's (store/avatars.go).
//   - Thumbnails (JPEG, at most 320 px, upright, no metadata) are made
//     after completion by ThumbnailWorkers goroutines, within a memory
//     budget they share (ThumbnailWorkers × MaxPixels × 4 bytes; an image
//     needing more than all of it, by media.ThumbnailCost, gets none, as does a
//     JPEG of more scans than media decodes, each a walk of the whole
//     picture); completion waits up
//     to ThumbnailWait for its own so the message usually carries it.
//     Pending ones are found again after a restart, and so is one whose
//     read of the original the store failed (a thumbnail made, however long
//     its decoding took, is stored and recorded under a deadline of its
//     own, never made again at every round); a blob's thumbnail
//     is queued or made once at a time (the cleanup's round passes over
//     one a worker has). Before a thumbnail is written its blob's
//     deletion is queued for when the job can no longer write it (taken
//     back when it is recorded for a live attachment), so a recall or an
//     expiry meanwhile, or a crash before it is recorded, leaves no
//     thumbnail behind. A thumbnail belongs
//     to the bytes (chat.ThumbnailKey of the blob), so recording it gives
//     it to every live copy that was forwarded while it was pending.
//   - Cleanup: uploads never used (attached, or made an avatar) are
//     dropped after TTL, and the quota of the days before yesterday is
//     forgotten; blobs are
//     deleted only through the store's queue, written in the transaction
//     that dropped what referenced them, and a deletion is a transaction
//     that forgets a queue row only after the blob (and its thumbnail) is
//     gone, or when a live attachment still names the blob (a forward's
//     copies share their source's bytes). A crash anywhere leaves a queue
//     row, never an orphan blob. Each deletion waits DeleteTimeout at
//     most, and a round whose store timed out tries no more: its
//     transaction is never held open by a store that does not answer.
//     A round also aborts what writes begun before the TTL left
//     unfinished in the blob store (BlobStore.AbortIncomplete: an object
//     store's multipart uploads a crash left, which no queue row names),
//     warning once while the store refuses it.
//
// # Concurrency
//
// Service is safe for concurrent use. It owns its goroutines: the
// thumbnail workers and one cleanup loop, started by Start and stopped by
// Close(ctx), which waits for them.
package attach
