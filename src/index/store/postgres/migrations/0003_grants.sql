-- mailgate's shared store, schema version 3 (issue 37): the delegated sign-ins of instances that
-- share this database instead of a state folder. Applied by `mailgate index migrate` in one
-- transaction, never by a serving process.
--
-- One row per mailbox identity (the index's key, and the row-level security key): the grant
-- sealed as a grant file is (XChaCha20-Poly1305 under MAILGATE_GRANT_KEY_FILE's key, bound to
-- the alias, provider, client id and tenant or issuer), so the database never holds a token in
-- the clear. `version` grows with each write: a save commits only over the version it loaded
-- (`delegated::shared`). No foreign key to mailgate_mailboxes: a sign-in comes before the first
-- sync, and an index's purge is not a sign-out.

CREATE TABLE mailgate_grants (
    mailbox text PRIMARY KEY,
    version bigint NOT NULL CHECK (version > 0),
    sealed bytea NOT NULL CHECK (octet_length(sealed) <= 65536),
    updated_at timestamptz NOT NULL
);

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['mailgate_grants']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY one_mailbox ON %I USING (mailbox = current_setting(''mailgate.mailbox'', true)) '
            'WITH CHECK (mailbox = current_setting(''mailgate.mailbox'', true))', t);
    END LOOP;
END
$$;
