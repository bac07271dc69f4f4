-- push_job.claims: how many times the job has been claimed. Each claim
-- adds one and nothing takes it back, so it names the claim: a claim's
-- result (and its recheck) is written only while the job is still on that
-- claim (internal/push, sender.go). attempts cannot say so: a claim handed
-- back by a stopping node, or a send it cancelled, takes its attempt back,
-- and a late result of an earlier claim whose lease ran out would match
-- the push again.
ALTER TABLE push_job ADD COLUMN claims integer NOT NULL DEFAULT 0;
