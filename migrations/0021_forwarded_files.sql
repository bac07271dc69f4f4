-- A forward copies its source's files: the copy is an attachment row of
-- its own (its id, its conversation and seq, the source's metadata and
-- caption) that names the source's blob. A blob may therefore stand in
-- several rows, and its bytes go only when none of them is live: the
-- deletion worker passes over (and forgets) a queued deletion while a row
-- that is not recalled names the blob (store.Attachments.DeleteBlobs).
ALTER TABLE attachment DROP CONSTRAINT attachment_blob_key_key;
CREATE INDEX attachment_blob_idx ON attachment (blob_key);
