-- Recalls and pushes (internal/push/doc.go, "Recalls"): a recalled message
-- must not be shown by a push still waiting, and the devices showing it
-- get a silent "remove" push.
--
-- push_job.kind     'message' (a notification) or 'remove' (take a
--                   conversation's notification off the devices; seq is
--                   the recalled message). One pending job of each kind
--                   per (user, conversation).
-- push_job.covered  the messages a notification stands for (count of
--                   them), so a recall finds the pushes that showed it.
-- state 'sent'      a notification that reached a device stays as the
--                   (user, conversation)'s newest sent one until a newer
--                   one replaces it: what devices show, for a recall to
--                   remove (its tag and collapse key replace older ones).
--
-- int8multirange needs PostgreSQL 14 or newer.
ALTER TABLE push_job ADD COLUMN kind text NOT NULL DEFAULT 'message' CHECK (kind IN ('message', 'remove'));
ALTER TABLE push_job ADD COLUMN covered int8multirange NOT NULL DEFAULT '{}';
-- Jobs waiting at the upgrade covered their last count messages, as far
-- as can be told now.
UPDATE push_job SET covered = int8multirange(int8range(GREATEST(seq - count + 1, 1), seq + 1));

ALTER TABLE push_job DROP CONSTRAINT push_job_state_check;
ALTER TABLE push_job ADD CONSTRAINT push_job_state_check CHECK (state IN ('pending', 'sending', 'sent'));

DROP INDEX push_job_pending_idx;
CREATE UNIQUE INDEX push_job_pending_idx ON push_job (user_id, conversation_id, kind) WHERE state = 'pending';
DROP INDEX push_job_due_idx;
CREATE INDEX push_job_due_idx ON push_job (not_before) WHERE state <> 'sent';
-- A conversation's jobs (a recall's lookup) and a pair's (ordering at
-- claim, replacing the sent one).
CREATE INDEX push_job_conv_idx ON push_job (conversation_id, user_id);
