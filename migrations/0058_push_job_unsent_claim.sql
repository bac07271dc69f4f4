-- push_job.unsent_claim: the claim (push_job.claims) of a notification
-- that took it waiting and has not begun sending it yet: set by the claim,
-- cleared right before its first request to a push service, the webhook or
-- Kafka. While it names the job's current claim, nothing of that claim was
-- sent: when its lease runs out (it waited in a node's queue), the next
-- claim hands it back, as a stopping node would, instead of taking it for
-- one whose node died mid-send (internal/push, sender.go). Any other claim
-- (one made before this migration, or by a chatd that does not set it)
-- counts as possibly sent, as before.
ALTER TABLE push_job ADD COLUMN unsent_claim integer;
