-- mailgate's shared index, schema version 1 (issue 30). Applied by `mailgate index migrate` in
-- one transaction, never by a serving process.
--
-- Every row belongs to one mailbox, named by its identity (`index::status::mailbox_identity`:
-- a digest, never an address), and row-level security (forced, so the owning role is bound
-- too) lets a session see and write only the mailbox it names in `mailgate.mailbox`.
-- Text columns hold mailgate's own tokens (the shared normalizer's output, made into a tsvector
-- with array_to_tsvector): PostgreSQL never re-tokenizes, so a token that is not here is a
-- token the index does not hold, exactly as on tantivy.

CREATE TABLE mailgate_mailboxes (
    mailbox text PRIMARY KEY,
    -- The text analysis version the tokens were made by (`text::ANALYZER_VERSION`).
    analyzer integer NOT NULL,
    -- The index status the last sync committed (the local store's status.json).
    status jsonb NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE mailgate_messages (
    mailbox text NOT NULL REFERENCES mailgate_mailboxes ON DELETE CASCADE,
    folder_id text NOT NULL,
    id text NOT NULL,
    received timestamptz,
    is_read boolean NOT NULL,
    has_attachments boolean NOT NULL,
    -- The content gap (`ContentGap`), 0 when the message is wholly here.
    gap smallint NOT NULL,
    -- Some attachment's text is not wholly in att_text_tokens.
    attachments_unread boolean NOT NULL,
    internet_message_id text,
    thread_ids text[] NOT NULL DEFAULT '{}',
    -- Lower-cased raw values for the substring filters (cut to 4,096 bytes).
    from_raw text NOT NULL,
    subject_raw text NOT NULL,
    subject_tokens tsvector NOT NULL,
    from_tokens tsvector NOT NULL,
    recipient_tokens tsvector NOT NULL,
    body_tokens tsvector NOT NULL,
    attachment_name_tokens tsvector NOT NULL,
    attachment_text_tokens tsvector NOT NULL,
    -- The summary an answer shows, as the local store keeps it.
    summary jsonb NOT NULL,
    PRIMARY KEY (mailbox, folder_id, id)
);
CREATE INDEX mailgate_messages_by_date ON mailgate_messages (mailbox, folder_id, received DESC);
CREATE INDEX mailgate_messages_by_message_id ON mailgate_messages (mailbox, internet_message_id);
CREATE INDEX mailgate_messages_subject ON mailgate_messages USING gin (subject_tokens);
CREATE INDEX mailgate_messages_from ON mailgate_messages USING gin (from_tokens);
CREATE INDEX mailgate_messages_recipients ON mailgate_messages USING gin (recipient_tokens);
CREATE INDEX mailgate_messages_body ON mailgate_messages USING gin (body_tokens);
CREATE INDEX mailgate_messages_attachment_names ON mailgate_messages USING gin (attachment_name_tokens);
CREATE INDEX mailgate_messages_attachment_text ON mailgate_messages USING gin (attachment_text_tokens);

-- The sync's position per folder (the local store's redb state).
CREATE TABLE mailgate_folder_state (
    mailbox text NOT NULL REFERENCES mailgate_mailboxes ON DELETE CASCADE,
    folder_id text NOT NULL,
    cursor jsonb NOT NULL,
    PRIMARY KEY (mailbox, folder_id)
);
CREATE TABLE mailgate_message_versions (
    mailbox text NOT NULL REFERENCES mailgate_mailboxes ON DELETE CASCADE,
    folder_id text NOT NULL,
    id text NOT NULL,
    -- The version the index holds (NULL: not indexed).
    version text,
    -- A version listed by the backend but not fetched yet (retried by the next sync).
    pending_version text,
    -- Listed by the inventory round under way.
    seen boolean NOT NULL DEFAULT false,
    PRIMARY KEY (mailbox, folder_id, id),
    CHECK (version IS NOT NULL OR pending_version IS NOT NULL OR seen)
);

-- One sync writer per mailbox: a lease with an epoch. Every index write checks the epoch it
-- holds in the same transaction, so a writer that lost its lease cannot commit (fencing).
CREATE TABLE mailgate_leases (
    mailbox text PRIMARY KEY,
    holder text NOT NULL,
    epoch bigint NOT NULL,
    expires_at timestamptz NOT NULL
);

-- The cursor key ring shared by every instance on this database. Not per mailbox: no row
-- security (the role that reads it may read every key).
CREATE TABLE mailgate_cursor_keys (
    id bytea PRIMARY KEY,
    secret bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    retired_at timestamptz
);

-- Per upstream account limits shared by every instance: a token bucket per account key digest.
CREATE TABLE mailgate_account_buckets (
    account bytea PRIMARY KEY,
    tokens double precision NOT NULL,
    updated_at timestamptz NOT NULL
);

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['mailgate_mailboxes', 'mailgate_messages', 'mailgate_folder_state',
                             'mailgate_message_versions', 'mailgate_leases']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY one_mailbox ON %I USING (mailbox = current_setting(''mailgate.mailbox'', true)) '
            'WITH CHECK (mailbox = current_setting(''mailgate.mailbox'', true))', t);
    END LOOP;
END
$$;
