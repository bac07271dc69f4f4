// Package blob implements chat.BlobStore, where attachment bytes live:
//
//   - Local, a directory on local disk (CHAT_DATA_DIR/blobs): the embedded
//     default, nothing to configure; chatd itself receives uploads
//     (PUT /v1/uploads/{id}) and serves downloads.
//   - S3, any S3-compatible object store (AWS S3, MinIO, Ceph, Garage, R2)
//     through minio-go: clients upload and download directly with
//     presigned URLs, so the bytes never pass through chatd.
//
// Contract (chat.BlobStore; one test suite, contract_test.go, runs against
// both, S3 against an in-process S3 server speaking real S3 HTTP):
//
//   - Keys are chatd's (random, unguessable: see NewKey); the store never
//     derives anything from them. PostgreSQL says what a blob is.
//   - Put is all or nothing: exactly the declared size, or ErrBlobSize and
//     nothing stored. Local writes a temporary file under blobs/tmp, fsyncs
//     it and renames it into place, so a crash leaves either the whole blob
//     or a temporary file, which NewLocal removes on the next start (the
//     node holds its data dir's lock, so no other process writes there).
//     S3 objects appear whole by the protocol.
//   - Delete of a missing key succeeds: deletions are retried after a crash.
//   - S3 writes a blob over 5 MiB as a multipart upload, which a crash
//     leaves unfinished (parts stored, no object): AbortIncomplete removes
//     those of chatd's keys begun before a time, for the cleanup round.
//   - A presigned PUT signs Content-Type and Content-Length: the object
//     store refuses other bytes than those declared.
//
// Package blob depends on the domain only (no store, no HTTP API), and
// every type is safe for concurrent use; nothing here owns a goroutine.
package blob
