-- Avatars from the attachment store.
--
-- An upload is for a message (purpose 'message': its conversation, as
-- before) or for an avatar (purpose 'avatar': no conversation until a
-- group takes it). An avatar upload goes pending -> complete like any
-- other; PUT /v1/me or PATCH /v1/conversations/{id} naming it moves it to
-- 'avatar' (in use: the user's, conversation_id NULL; a group's,
-- conversation_id the group), and replacing or clearing that avatar to
-- 'released', in the transaction that queues its blob for deletion: the
-- row stays so a fetch answers 410, as a recalled file's does.
--
-- user_profile.avatar_url and conversation.avatar_url hold what clients
-- read, an https URL the user set or the avatar upload's download path
-- (/v1/attachments/{id}); avatar_upload_id names the upload in the
-- second case, so replacing it releases the right row.
ALTER TABLE attachment ADD COLUMN purpose text NOT NULL DEFAULT 'message'
    CHECK (purpose IN ('message', 'avatar'));
ALTER TABLE attachment ALTER COLUMN conversation_id DROP NOT NULL;
ALTER TABLE attachment DROP CONSTRAINT attachment_state_check;
ALTER TABLE attachment ADD CONSTRAINT attachment_state_check
    CHECK (state IN ('pending', 'complete', 'attached', 'recalled', 'avatar', 'released'));
-- A message upload has its conversation and is never an avatar; an avatar
-- upload is never attached to a message.
ALTER TABLE attachment ADD CONSTRAINT attachment_purpose_state_check CHECK (
    CASE purpose
        WHEN 'message' THEN conversation_id IS NOT NULL AND state NOT IN ('avatar', 'released')
        ELSE state NOT IN ('attached', 'recalled')
    END);

-- Uploads never used (by a message or as an avatar), oldest first: the
-- CHAT_UPLOAD_TTL expiry. It replaces attachment_unattached_idx (seq IS
-- NULL), which avatars in use would now match.
CREATE INDEX attachment_unused_idx ON attachment (created_at) WHERE state IN ('pending', 'complete');
DROP INDEX attachment_unattached_idx;

ALTER TABLE user_profile ADD COLUMN avatar_upload_id text;
ALTER TABLE user_profile ADD CONSTRAINT user_profile_avatar_upload_check
    CHECK (avatar_upload_id IS NULL OR avatar_url = '/v1/attachments/' || avatar_upload_id);
ALTER TABLE conversation ADD COLUMN avatar_upload_id text;
ALTER TABLE conversation ADD CONSTRAINT conversation_avatar_upload_check
    CHECK (avatar_upload_id IS NULL OR avatar_url = '/v1/attachments/' || avatar_upload_id);
