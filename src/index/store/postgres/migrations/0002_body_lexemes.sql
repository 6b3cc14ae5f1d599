-- mailgate's shared index, schema version 2 (issue 36): a long body's tokens, whole. Applied by
-- `mailgate index migrate` in one transaction, never by a serving process.
--
-- PostgreSQL refuses a tsvector over 1 MiB, so a message row's body_tokens holds the body's
-- first lexemes (in byte order) up to mailgate's bound, and the rest go here, in chunks each
-- under it (`index::store::postgres::rows`). Every token of a body is in exactly one place: its
-- row's body_tokens or one chunk. Derived from the row and going with it: a message put again
-- or removed loses its chunks (its row is deleted, and the foreign key cascades), as a mailbox's
-- purge does.

CREATE TABLE mailgate_body_lexemes (
    mailbox text NOT NULL,
    folder_id text NOT NULL,
    id text NOT NULL,
    -- 1, 2, …: the order the lexemes were cut in (a read never depends on it).
    chunk integer NOT NULL,
    tokens tsvector NOT NULL,
    FOREIGN KEY (mailbox, folder_id, id) REFERENCES mailgate_messages ON DELETE CASCADE
);
-- A match on the chunks must be the GIN index's: it reads no chunk's tokens, where any other
-- path tests (and so unpacks, most of a megabyte each) every chunk of the mailbox, and the
-- planner, blind to that cost, prefers any B-tree, even scanned whole, over a few hundred rows
-- (measured at 200 chunks: 45 ms and 100 MB read, against 0.06 ms). So the table has no
-- B-tree: a hash index on the message's id serves its row's cascade and a read's look at one
-- message's chunks, and is of no use to a statement without that id (reads turn sequential
-- scans off). Nothing but the write path keeps a chunk number once per message: a message's
-- chunks are written only with its row, just inserted, whose own key is unique.
CREATE INDEX mailgate_body_lexemes_of_message ON mailgate_body_lexemes USING hash (id);
CREATE INDEX mailgate_body_lexemes_tokens ON mailgate_body_lexemes USING gin (tokens);

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['mailgate_body_lexemes']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY one_mailbox ON %I USING (mailbox = current_setting(''mailgate.mailbox'', true)) '
            'WITH CHECK (mailbox = current_setting(''mailgate.mailbox'', true))', t);
    END LOOP;
END
$$;
