-- chat_batch_row carried the send function's decisions from its deciding
-- statement to its writing one. The function decides and writes in one
-- statement now (functions.sql), nothing uses the type, and a type nobody
-- uses only misleads the next reader of the schema.
DROP TYPE chat_batch_row;
