-- push_job.recalled_older: on a claimed notification ('sending'), the
-- messages recalled during its claim that the pair's older notification
-- the devices show (the newest claimed one before it) stood for. The
-- recall's remove goes to the newest claimed notification alone; if this
-- one then reaches no device (handed back unsent, skipped, refused), the
-- devices still show the older one, and get a remove of these
-- (internal/push, sender.go).
ALTER TABLE push_job ADD COLUMN recalled_older int8multirange NOT NULL DEFAULT '{}';
