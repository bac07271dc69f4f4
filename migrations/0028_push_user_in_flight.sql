-- The claim counts each user's pushes in flight (claimed, leased) so that
-- one user's devices, if their push services never answer, hold at most a
-- few of a node's workers: the jobs being sent are few, and this index
-- finds a user's among them without reading the others.
CREATE INDEX push_job_sending_idx ON push_job (user_id) WHERE state = 'sending';
