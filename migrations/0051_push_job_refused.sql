-- push_job.refused: the devices whose push service (or the webhook)
-- refused this job's push for good (a 4xx other than 404, 410 and 429)
-- in a claim a stopping node handed back: the claim's other sends were
-- cut, nothing reached a device, and the job's devices are as they were;
-- the next claims send to the others alone (internal/push, sender.go).
-- NULL: none.
ALTER TABLE push_job ADD COLUMN refused bigint[];
