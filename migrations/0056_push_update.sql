-- push_job.kind 'update': the text a conversation's notification shows
-- (a preview of message seq) was edited; the user's devices get it
-- silently, so the text the edit took out does not stay on their lock
-- screens (internal/push, doc.go "Edits"). Like a remove, one pending per
-- (user, conversation) (push_job_pending_idx), sent before a newer
-- notification of the pair.
ALTER TABLE push_job DROP CONSTRAINT push_job_kind_check;
ALTER TABLE push_job ADD CONSTRAINT push_job_kind_check CHECK (kind IN ('message', 'remove', 'update'));
