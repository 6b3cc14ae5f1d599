-- mailgate's shared index, schema version 1 (issue 30). Applied by `mailgate index migrate` in
-- one transaction, never by a serving process.
--
-- Every row belongs to one mailbox, named by its identity (`index::status::mailbox_identity`:
-- a digest, never an address), and row-level security (forced, so the owning role is bound
-- too) lets a session see and write only the mailbox it names in `mailgate.mailbox`.
-- Text columns hold mailgate's own tokens (the shared normalizer's output, written as tsvector
-- lexemes and matched by tsquery lexemes mailgate quotes itself): PostgreSQL never
-- re-tokenizes, so a token that is not here is a token the index does not hold, exactly as on
-- tantivy.

CREATE TABLE mailgate_mailboxes (
    mailbox text PRIMARY KEY,
    -- The text analysis version the tokens were made by (`text::ANALYZER_VERSION`).
    analyzer integer NOT NULL,
    -- The index status the last sync wrote (the local store's status.json); NULL before.
    status jsonb,
    -- `mailgate index pause`: syncs leave the mailbox alone until `resume`.
    paused boolean NOT NULL DEFAULT false,
    -- Ranking statistics (BM25), kept by every commit: messages, and tokens per field in the
    -- order of mailgate_messages.field_lengths.
    docs bigint NOT NULL DEFAULT 0,
    field_tokens bigint[] NOT NULL DEFAULT '{0,0,0,0,0,0}',
    committed_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE mailgate_messages (
    mailbox text NOT NULL REFERENCES mailgate_mailboxes ON DELETE CASCADE,
    folder_id text NOT NULL,
    id text NOT NULL,
    -- Seconds since 1970 (0: unknown), as the local store sorts and filters.
    received bigint NOT NULL,
    is_read boolean NOT NULL,
    has_attachments boolean NOT NULL,
    -- The content gap (`index::stored::gap_code`), 0 when the message is wholly here.
    gap smallint NOT NULL,
    -- Some attachment's text is not wholly in attachment_text_tokens.
    attachments_unread boolean NOT NULL,
    internet_message_id text,
    -- Lower-cased raw values for the substring filters (cut to 4,096 bytes): the sender's
    -- name and address, the subject.
    from_raw text[] NOT NULL,
    subject_raw text NOT NULL,
    subject_tokens tsvector NOT NULL,
    from_tokens tsvector NOT NULL,
    recipient_tokens tsvector NOT NULL,
    body_tokens tsvector NOT NULL,
    attachment_name_tokens tsvector NOT NULL,
    attachment_text_tokens tsvector NOT NULL,
    -- Tokens per field (BM25's field length): subject, from, recipients, body, attachment
    -- names, attachment text.
    field_lengths integer[] NOT NULL,
    -- "<field number>:<token>" -> how often, for the tokens a field holds more than once.
    repeats jsonb NOT NULL,
    -- The summary an answer shows (`index::stored`), opaque to the database.
    summary bytea NOT NULL,
    PRIMARY KEY (mailbox, folder_id, id)
);
CREATE INDEX mailgate_messages_by_date ON mailgate_messages (mailbox, folder_id, received DESC);
CREATE INDEX mailgate_messages_by_id ON mailgate_messages (mailbox, id);
CREATE INDEX mailgate_messages_subject ON mailgate_messages USING gin (subject_tokens);
CREATE INDEX mailgate_messages_from ON mailgate_messages USING gin (from_tokens);
CREATE INDEX mailgate_messages_recipients ON mailgate_messages USING gin (recipient_tokens);
CREATE INDEX mailgate_messages_body ON mailgate_messages USING gin (body_tokens);
CREATE INDEX mailgate_messages_attachment_names ON mailgate_messages USING gin (attachment_name_tokens);
CREATE INDEX mailgate_messages_attachment_text ON mailgate_messages USING gin (attachment_text_tokens);

-- How many messages each folder holds, per content gap (0: wholly indexed), kept by every
-- commit: an answer's scope and its gaps are read here rather than counted over the messages.
CREATE TABLE mailgate_folder_counts (
    mailbox text NOT NULL REFERENCES mailgate_mailboxes ON DELETE CASCADE,
    folder_id text NOT NULL,
    gap smallint NOT NULL,
    messages bigint NOT NULL,
    PRIMARY KEY (mailbox, folder_id, gap)
);

-- Semantic recall: each passage's vector (a message has up to 8), of the embeddings model that
-- made it, as pgvector's halfvec. Derived data: a message's vectors go with its row (replaced or
-- removed), and a sync embeds them again. The nearest-passage search uses an HNSW index per
-- vector size, `mailgate_vectors_hnsw_<dims>` over `embedding::halfvec(<dims>)`: the size is
-- the model's, known only when the first sync stores one, so that sync creates it (the
-- `vector` extension's operator class needs a fixed size).
CREATE TABLE mailgate_vectors (
    mailbox text NOT NULL,
    folder_id text NOT NULL,
    id text NOT NULL,
    passage smallint NOT NULL,
    model text NOT NULL,
    dims integer NOT NULL,
    embedding halfvec NOT NULL,
    PRIMARY KEY (mailbox, folder_id, id, passage),
    FOREIGN KEY (mailbox, folder_id, id) REFERENCES mailgate_messages ON DELETE CASCADE
);
CREATE INDEX mailgate_vectors_by_model ON mailgate_vectors (mailbox, model, dims);

-- The sync's position (the local store's redb state): per folder its change-feed cursor, per
-- message the version indexed, the version listed but not fetched yet, and the ids the
-- inventory round under way listed.
CREATE TABLE mailgate_folder_state (
    mailbox text NOT NULL REFERENCES mailgate_mailboxes ON DELETE CASCADE,
    folder_id text NOT NULL,
    cursor jsonb NOT NULL,
    PRIMARY KEY (mailbox, folder_id)
);
CREATE TABLE mailgate_versions (
    mailbox text NOT NULL REFERENCES mailgate_mailboxes ON DELETE CASCADE,
    folder_id text NOT NULL,
    id text NOT NULL,
    version text NOT NULL,
    PRIMARY KEY (mailbox, folder_id, id)
);
CREATE TABLE mailgate_pending (
    mailbox text NOT NULL REFERENCES mailgate_mailboxes ON DELETE CASCADE,
    folder_id text NOT NULL,
    id text NOT NULL,
    version text NOT NULL,
    PRIMARY KEY (mailbox, folder_id, id)
);
CREATE TABLE mailgate_seen (
    mailbox text NOT NULL REFERENCES mailgate_mailboxes ON DELETE CASCADE,
    folder_id text NOT NULL,
    id text NOT NULL,
    PRIMARY KEY (mailbox, folder_id, id)
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

-- Per upstream account "at once" limits shared by every instance: N slots per account, each
-- held by one request or connection until given back or expired (a dead holder's).
CREATE TABLE mailgate_account_slots (
    account bytea NOT NULL,
    slot integer NOT NULL,
    holder text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (account, slot)
);

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['mailgate_mailboxes', 'mailgate_messages', 'mailgate_vectors',
                             'mailgate_folder_counts', 'mailgate_folder_state',
                             'mailgate_versions', 'mailgate_pending', 'mailgate_seen',
                             'mailgate_leases']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY one_mailbox ON %I USING (mailbox = current_setting(''mailgate.mailbox'', true)) '
            'WITH CHECK (mailbox = current_setting(''mailgate.mailbox'', true))', t);
    END LOOP;
END
$$;
