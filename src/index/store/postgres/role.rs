//! Whom the shared store lets in. Row-level security keeps a session to the mailbox it names
//! only when it binds the session's role, so every connection mailgate opens ([`super::connect`]
//! and each new one of a [`super::Pool`]) is vetted ([`vet`]) before its first statement, and
//! refused with a one-line [`Refusal`] naming the rule it breaks:
//!
//! 1. the role: neither the login role nor the current one is a superuser or has BYPASSRLS, and
//!    neither is a member (direct or not, with or without INHERIT or SET) of a role that is or
//!    has, since a member may act as that role (`pg_has_role(…, 'MEMBER')` over `pg_roles`);
//! 2. the tables: each per-mailbox table ([`PER_MAILBOX_TABLES`]) has row-level security enabled
//!    and forced (so the owning role is bound too), its `one_mailbox` policy as `index migrate`
//!    made it (permissive, every command, every role, the same USING and WITH CHECK), and no
//!    other permissive policy, which would widen it (a restrictive one may only narrow it);
//! 3. what a session sees: in a read-only transaction scoped to a mailbox no identity can be,
//!    no per-mailbox table shows a row. This catches what the catalog does not say (a role
//!    attribute this check does not know of, a policy that reads otherwise than it looks); on
//!    a database that holds no rows yet it proves nothing, and 1 and 2 stand alone.
//!
//! The schema's version is checked between 1 and 2, as every caller needs it current (the
//! tables 2 and 3 look at are that version's). Only `mailgate index migrate` connects without
//! the check ([`super::connect_to_migrate`]): it may run as a superuser, and says so.
//! Called by `super` only.

use tokio_postgres::Client;

use super::settings::RoleCheck;
use super::{PgError, migrations};

/// The tables whose rows belong to one mailbox (`migrations/`, in the order they are made).
pub(crate) const PER_MAILBOX_TABLES: [&str; 11] = [
    "mailgate_mailboxes",
    "mailgate_messages",
    "mailgate_vectors",
    "mailgate_folder_counts",
    "mailgate_folder_state",
    "mailgate_versions",
    "mailgate_pending",
    "mailgate_seen",
    "mailgate_leases",
    "mailgate_body_lexemes",
    "mailgate_grants",
];

/// The policy's name, and its condition as PostgreSQL prints it back (`pg_get_expr`).
const POLICY: &str = "one_mailbox";
const POLICY_CONDITION: &str = "(mailbox = current_setting('mailgate.mailbox'::text, true))";

/// The scope of the probe: no mailbox is named so (identities are `sha256:` digests).
const NO_MAILBOX: &str = "mailgate-probe:no-such-mailbox";

/// How to make the role mailgate needs, as every refusal of a role says.
const FIX: &str = "log in as a role made with `CREATE ROLE mailgate LOGIN NOSUPERUSER \
                   NOBYPASSRLS` and a member of no role that is a superuser or has BYPASSRLS \
                   (docs/deployment.md); only `mailgate index migrate` may run as a superuser";

/// Why the store refuses a connection: the rule its role or the database breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("the role it logs in as is a superuser, which row-level security does not bind: {FIX}")]
    Superuser,
    #[error("the role it logs in as has BYPASSRLS, so row-level security does not bind it: {FIX}")]
    BypassRls,
    #[error("the role it logs in as is a member of a superuser role, and so may act as one: {FIX}")]
    MemberOfSuperuser,
    #[error(
        "the role it logs in as is a member of a role with BYPASSRLS, and so may act as one: \
         {FIX}"
    )]
    MemberOfBypassRls,
    #[error(
        "the table {0} is missing or does not have row-level security enabled and forced: as \
         its owner, run `ALTER TABLE {0} ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY` \
         (docs/deployment.md)"
    )]
    Unforced(&'static str),
    #[error(
        "the table {0} lacks the row policy `one_mailbox` as `mailgate index migrate` made it, \
         or has another permissive policy, which widens it: drop the other policy, or recreate \
         the database (docs/deployment.md)"
    )]
    Policy(&'static str),
    #[error(
        "a session scoped to no mailbox reads rows of {0}, so row-level security does not bind \
         the role it logs in as: {FIX}"
    )]
    Probe(&'static str),
}

impl Refusal {
    /// What `index migrate` says when it ran as a role the other commands refuse.
    pub(crate) fn migrate_note(self) -> String {
        let what = match self {
            Refusal::Superuser => "a superuser",
            Refusal::BypassRls => "a role with BYPASSRLS",
            Refusal::MemberOfSuperuser => "a member of a superuser role",
            Refusal::MemberOfBypassRls => "a member of a role with BYPASSRLS",
            Refusal::Unforced(_) | Refusal::Policy(_) | Refusal::Probe(_) => {
                "a role mailgate refuses"
            }
        };
        format!(
            "note: migrated as {what}, as only `index migrate` may; serve, index sync and the \
             other index commands refuse it: give them a role made with `CREATE ROLE mailgate \
             LOGIN NOSUPERUSER NOBYPASSRLS` (docs/deployment.md)"
        )
    }
}

/// Checks a fresh connection as the module doc says, before anything else uses it; `Off`
/// (unit tests only) checks the schema alone.
pub(crate) async fn vet(client: &mut Client, check: RoleCheck) -> Result<(), PgError> {
    let enforced = match check {
        RoleCheck::Enforced => true,
        #[cfg(test)]
        RoleCheck::Off => false,
    };
    if enforced && let Some(refusal) = role(client).await? {
        return Err(refusal.into());
    }
    migrations::check(&*client).await?;
    if enforced {
        tables(client).await?;
        probe(client).await?;
    }
    Ok(())
}

/// The first rule of the role (1 of the module doc) the connection's role breaks, if any.
pub(crate) async fn role(client: &Client) -> Result<Option<Refusal>, PgError> {
    // A superuser is a member of every role: its own attributes are named first.
    let row = client
        .query_one(
            "SELECT coalesce(bool_or(rolsuper) FILTER (WHERE me), false),
                    coalesce(bool_or(rolbypassrls) FILTER (WHERE me), false),
                    coalesce(bool_or(rolsuper) FILTER (WHERE NOT me), false),
                    coalesce(bool_or(rolbypassrls) FILTER (WHERE NOT me), false)
               FROM (SELECT r.rolsuper, r.rolbypassrls,
                            r.rolname IN (current_user, session_user) AS me
                       FROM pg_roles r
                      WHERE r.rolname IN (current_user, session_user)
                         OR pg_has_role(session_user, r.oid, 'MEMBER')
                         OR pg_has_role(current_user, r.oid, 'MEMBER')) AS r",
            &[],
        )
        .await?;
    let flags: [bool; 4] = [
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
    ];
    let refusals = [
        Refusal::Superuser,
        Refusal::BypassRls,
        Refusal::MemberOfSuperuser,
        Refusal::MemberOfBypassRls,
    ];
    Ok(flags
        .iter()
        .zip(refusals)
        .find_map(|(&broken, refusal)| broken.then_some(refusal)))
}

/// Rule 2 of the module doc, per table in [`PER_MAILBOX_TABLES`]' order.
async fn tables(client: &Client) -> Result<(), PgError> {
    // Each name resolves as the store's statements resolve it (the search path).
    let rows = client
        .query(
            "SELECT coalesce(c.relrowsecurity AND c.relforcerowsecurity, false),
                    EXISTS (SELECT 1 FROM pg_policy p
                             WHERE p.polrelid = c.oid AND p.polname = $2 AND p.polpermissive
                               AND p.polcmd = '*' AND p.polroles = '{0}'
                               AND pg_get_expr(p.polqual, p.polrelid) = $3
                               AND pg_get_expr(p.polwithcheck, p.polrelid) = $3),
                    NOT EXISTS (SELECT 1 FROM pg_policy p
                                 WHERE p.polrelid = c.oid AND p.polpermissive
                                   AND p.polname <> $2)
               FROM unnest($1::text[]) WITH ORDINALITY AS t(name, n)
               LEFT JOIN pg_class c ON c.oid = to_regclass(t.name)
              ORDER BY t.n",
            &[&PER_MAILBOX_TABLES.as_slice(), &POLICY, &POLICY_CONDITION],
        )
        .await?;
    for (row, table) in rows.iter().zip(PER_MAILBOX_TABLES) {
        let (forced, ours, alone): (bool, bool, bool) =
            (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
        if !forced {
            return Err(Refusal::Unforced(table).into());
        }
        if !(ours && alone) {
            return Err(Refusal::Policy(table).into());
        }
    }
    Ok(())
}

/// Rule 3 of the module doc: the tables a session scoped to no mailbox reads rows of.
async fn probe(client: &mut Client) -> Result<(), PgError> {
    let exists: Vec<String> = PER_MAILBOX_TABLES
        .iter()
        .map(|t| format!("EXISTS (SELECT 1 FROM {t})"))
        .collect();
    let tx = client.build_transaction().read_only(true).start().await?;
    tx.execute(
        "SELECT set_config('mailgate.mailbox', $1, true)",
        &[&NO_MAILBOX],
    )
    .await?;
    let row = tx
        .query_one(&format!("SELECT ARRAY[{}]", exists.join(", ")), &[])
        .await?;
    let seen: Vec<bool> = row.try_get(0)?;
    tx.rollback().await?;
    match PER_MAILBOX_TABLES.iter().zip(seen).find(|(_, seen)| *seen) {
        Some((table, _)) => Err(Refusal::Probe(table).into()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::store::postgres::testdb::{Superuser, fresh_as_superuser};
    use crate::index::store::postgres::{PgSettings, connect, open};

    const TTL: std::time::Duration = std::time::Duration::from_secs(60);

    fn refusal(e: Result<Client, PgError>) -> Refusal {
        match e {
            Err(PgError::Role(r)) => r,
            Err(e) => panic!("another error: {e}"),
            Ok(_) => panic!("let in"),
        }
    }

    /// Drops the roles earlier runs of these tests made whose process is gone (a failed run
    /// leaves them: roles belong to the server, not to the test's database).
    async fn drop_leftover_roles(db: &Superuser) {
        let names: Vec<String> = db
            .client
            .query(
                "SELECT rolname::text FROM pg_roles WHERE rolname LIKE 'u\\_role\\_%'",
                &[],
            )
            .await
            .expect("roles")
            .iter()
            .map(|r| r.get(0))
            .collect();
        for name in names {
            let pid = name.split('_').nth(2).unwrap_or_default();
            if !std::path::Path::new("/proc").join(pid).exists() {
                let _ = db
                    .client
                    .batch_execute(&format!("DROP ROLE IF EXISTS {name}"))
                    .await;
            }
        }
    }

    #[tokio::test]
    async fn a_member_of_a_role_row_security_does_not_bind_is_refused() {
        let Some(db) = fresh_as_superuser("role_member", TTL, RoleCheck::Enforced).await else {
            return;
        };
        drop_leftover_roles(&db).await;
        let tag = format!("u_role_{}", std::process::id());
        db.client
            .batch_execute(&format!(
                "CREATE ROLE {tag}_bypass NOLOGIN NOSUPERUSER BYPASSRLS;
                 CREATE ROLE {tag}_super NOLOGIN SUPERUSER;
                 CREATE ROLE {tag}_a LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD 'a' IN ROLE {tag}_bypass;
                 CREATE ROLE {tag}_b LOGIN NOSUPERUSER NOBYPASSRLS NOINHERIT PASSWORD 'b';
                 CREATE ROLE {tag}_middle NOLOGIN IN ROLE {tag}_super;
                 GRANT {tag}_middle TO {tag}_b WITH INHERIT FALSE, SET FALSE;"
            ))
            .await
            .expect("make the roles");
        let as_role = |role: &str, password: &str| {
            PgSettings::for_test(
                &format!(
                    "postgres://{role}:{password}@127.0.0.1:{}/{}",
                    db.owner.port, db.owner.database
                ),
                &db.owner.database,
                TTL,
            )
        };
        // NOBYPASSRLS itself, but a member of a role with BYPASSRLS.
        let a = refusal(connect(&as_role(&format!("{tag}_a"), "a")).await);
        // A member, through another role and with neither INHERIT nor SET, of a superuser role.
        let b = refusal(connect(&as_role(&format!("{tag}_b"), "b")).await);
        let superuser = refusal(connect(&db.settings).await);
        db.client
            .batch_execute(&format!(
                "DROP ROLE {tag}_a; DROP ROLE {tag}_b; DROP ROLE {tag}_middle;
                 DROP ROLE {tag}_super; DROP ROLE {tag}_bypass;"
            ))
            .await
            .expect("drop the roles");
        assert_eq!(a, Refusal::MemberOfBypassRls);
        assert_eq!(b, Refusal::MemberOfSuperuser);
        assert_eq!(superuser, Refusal::Superuser);
        connect(&db.owner).await.expect("the owning role is let in");
    }

    #[tokio::test]
    async fn a_table_without_forced_row_security_or_with_a_wider_policy_is_refused() {
        let Some(mut db) = fresh_as_superuser("role_tables", TTL, RoleCheck::Enforced).await else {
            return;
        };
        let admin = |sql: &'static str| {
            let client = &db.client;
            async move { client.batch_execute(sql).await.expect(sql) }
        };
        connect(&db.owner).await.expect("as migrated");
        admin("ALTER TABLE mailgate_seen NO FORCE ROW LEVEL SECURITY").await;
        assert_eq!(
            refusal(connect(&db.owner).await),
            Refusal::Unforced("mailgate_seen")
        );
        // The statement the refusal names restores it.
        admin("ALTER TABLE mailgate_seen ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY")
            .await;
        connect(&db.owner).await.expect("forced again");
        admin("ALTER TABLE mailgate_vectors DISABLE ROW LEVEL SECURITY").await;
        assert_eq!(
            refusal(connect(&db.owner).await),
            Refusal::Unforced("mailgate_vectors")
        );
        admin("ALTER TABLE mailgate_vectors ENABLE ROW LEVEL SECURITY").await;
        // Another permissive policy widens the table's; a restrictive one only narrows it.
        admin("CREATE POLICY everyone ON mailgate_pending USING (true)").await;
        assert_eq!(
            refusal(connect(&db.owner).await),
            Refusal::Policy("mailgate_pending")
        );
        admin("DROP POLICY everyone ON mailgate_pending").await;
        admin("CREATE POLICY narrower ON mailgate_pending AS RESTRICTIVE USING (id <> '')").await;
        connect(&db.owner)
            .await
            .expect("a restrictive policy narrows");
        admin("ALTER POLICY one_mailbox ON mailgate_versions USING (true)").await;
        assert_eq!(
            refusal(connect(&db.owner).await),
            Refusal::Policy("mailgate_versions")
        );
        admin(
            "ALTER POLICY one_mailbox ON mailgate_versions
               USING (mailbox = current_setting('mailgate.mailbox', true))",
        )
        .await;
        connect(&db.owner).await.expect("the policy as it was");
        admin("DROP POLICY one_mailbox ON mailgate_leases").await;
        assert_eq!(
            refusal(connect(&db.owner).await),
            Refusal::Policy("mailgate_leases")
        );

        // The probe: a session scoped to no mailbox sees no row, unless its role is not bound.
        db.client
            .batch_execute(
                "INSERT INTO mailgate_mailboxes (mailbox, analyzer) VALUES ('sha256:probe', 1)",
            )
            .await
            .expect("a row");
        let mut owner = open(&db.owner).await.expect("the owning role");
        probe(&mut owner).await.expect("bound by row security");
        let e = probe(&mut db.client)
            .await
            .expect_err("the superuser reads it");
        assert!(
            matches!(e, PgError::Role(Refusal::Probe("mailgate_mailboxes"))),
            "{e}"
        );
        // The probe's transaction is over: the connection is usable.
        db.client.batch_execute("SELECT 1").await.expect("usable");
    }

    #[test]
    fn the_tables_checked_are_those_the_migrations_put_under_row_security() {
        let mut named = Vec::new();
        for sql in [
            include_str!("migrations/0001_shared_index.sql"),
            include_str!("migrations/0002_body_lexemes.sql"),
            include_str!("migrations/0003_grants.sql"),
        ] {
            let (_, forced) = sql
                .split_once("FOREACH t IN ARRAY ARRAY[")
                .expect("the migration's row security loop");
            let (list, _) = forced.split_once(']').expect("its table list");
            named.extend(list.split(',').map(|t| t.trim().trim_matches('\'')));
            assert!(sql.contains(
                "CREATE POLICY one_mailbox ON %I USING (mailbox = current_setting(''mailgate.mailbox'', true)) '\n            'WITH CHECK (mailbox = current_setting(''mailgate.mailbox'', true))"
            ));
            // Every table a migration makes is in its loop, or is one of the shared ones.
            for made in sql.split("CREATE TABLE ").skip(1) {
                let table = made.split_whitespace().next().unwrap_or_default();
                assert!(
                    named.contains(&table) || SHARED_TABLES.contains(&table),
                    "{table} is neither per mailbox nor shared"
                );
            }
        }
        assert_eq!(named, PER_MAILBOX_TABLES);
    }

    /// The tables no mailbox owns (no row security: `migrations/0001_shared_index.sql`).
    const SHARED_TABLES: [&str; 3] = [
        "mailgate_cursor_keys",
        "mailgate_account_buckets",
        "mailgate_account_slots",
    ];

    #[test]
    fn every_refusal_is_one_line_naming_the_rule_and_never_a_secret() {
        let all = [
            Refusal::Superuser,
            Refusal::BypassRls,
            Refusal::MemberOfSuperuser,
            Refusal::MemberOfBypassRls,
            Refusal::Unforced("mailgate_messages"),
            Refusal::Policy("mailgate_messages"),
            Refusal::Probe("mailgate_messages"),
        ];
        for refusal in all {
            let text = refusal.to_string();
            assert!(!text.contains('\n'), "{text}");
            assert!(text.contains("docs/deployment.md"), "{text}");
            assert!(
                !text.contains("postgres://") && !text.contains("PASSWORD"),
                "{text}"
            );
            assert!(!refusal.migrate_note().contains('\n'));
        }
        assert!(Refusal::Superuser.to_string().contains("is a superuser"));
        assert!(Refusal::BypassRls.to_string().contains("has BYPASSRLS"));
        assert!(
            Refusal::Superuser
                .to_string()
                .contains("CREATE ROLE mailgate LOGIN NOSUPERUSER NOBYPASSRLS")
        );
    }
}
