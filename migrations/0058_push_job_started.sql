-- push_job.started: a claim of the job began sending it (set right before
-- its first request to a push service, the webhook or Kafka), so the push
-- may be on a device. A claim whose lease ran out before that (it waited in
-- a node's queue) sent nothing: the next claim hands it back first, as a
-- stopping node would, instead of taking it for one whose node died
-- mid-send (internal/push, sender.go). Claims made before this migration
-- count as started (their sends' outcome is not known); waiting jobs, and
-- the jobs written from now on, have not started.
ALTER TABLE push_job ADD COLUMN started boolean NOT NULL DEFAULT true;
ALTER TABLE push_job ALTER COLUMN started SET DEFAULT false;
UPDATE push_job SET started = false WHERE state = 'pending';
