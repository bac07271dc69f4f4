-- A forward's copies of its source's files are the forwarder's uploads
-- (functions.sql writes them so from now on): GET /v1/uploads/{id} answers
-- a row's uploader alone, and the original uploader, who may not be in the
-- forward's conversation, must not read what became of it there. Every
-- attached row's uploader is its message's sender (a send attaches only the
-- sender's uploads), so the copies written before take their message's.
UPDATE attachment a SET uploader_id = m.sender_id
FROM message m
WHERE m.conversation_id = a.conversation_id AND m.seq = a.seq
  AND a.seq IS NOT NULL AND a.uploader_id <> m.sender_id;
