-- Whether a user's watchers were last told they are online: the nodes
-- announce presence transitions by claiming them here (store.Presence
-- ClaimOnline, ClaimOffline), so that a user who left one node and came
-- back on another within the grace, before the first announced them
-- offline, is not announced online a second time by the other.
-- false for users online while this migrates: they are announced online
-- again at their next connection elsewhere, as before.
ALTER TABLE user_presence ADD COLUMN announced_online boolean NOT NULL DEFAULT false;
