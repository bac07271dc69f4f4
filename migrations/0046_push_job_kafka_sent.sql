-- push_job.kafka_sent: the devices whose push of this job the Kafka topic
-- accepted while the webhook, also configured, asked for a retry (or the
-- send was cancelled): a retry goes to the webhook alone for them, so the
-- operator's Kafka consumer gets each push once (internal/push,
-- outputs.go). NULL: none.
ALTER TABLE push_job ADD COLUMN kafka_sent bigint[];
