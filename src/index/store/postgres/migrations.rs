//! The shared index's schema, versioned: each migration is an SQL file compiled into the binary,
//! applied in order by `mailgate index migrate` alone, all pending ones in one transaction under
//! an advisory lock (two operators migrating at once apply each once), and recorded in
//! `mailgate_schema`. A serving process never changes the schema. Whoever migrates, the schema
//! belongs to the database's owner ([`act_as_owner`]).

use super::PgError;

/// One schema change.
struct Migration {
    version: i32,
    name: &'static str,
    sql: &'static str,
}

/// Every migration, in order. An applied one is never edited: a change is a new version.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "shared index",
        sql: include_str!("migrations/0001_shared_index.sql"),
    },
    Migration {
        version: 2,
        name: "long bodies",
        sql: include_str!("migrations/0002_body_lexemes.sql"),
    },
    Migration {
        version: 3,
        name: "shared grants",
        sql: include_str!("migrations/0003_grants.sql"),
    },
];

/// The schema version this binary reads and writes.
pub(crate) const SCHEMA_VERSION: i32 = 3;

/// An arbitrary constant naming mailgate's migration lock among the database's advisory locks.
const LOCK_KEY: i64 = 0x6d61_696c_6761_7465; // "mailgate"

const CREATE_VERSIONS: &str = "CREATE TABLE IF NOT EXISTS mailgate_schema (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)";

/// Where a database's schema stands against this binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SchemaState {
    /// At this binary's version.
    Current,
    /// Older (0: never migrated): `mailgate index migrate` brings it up.
    Behind { at: i32 },
    /// Newer than this binary knows: an older mailgate must not write it.
    Ahead { at: i32 },
}

impl SchemaState {
    fn of(at: i32) -> Self {
        match at.cmp(&SCHEMA_VERSION) {
            std::cmp::Ordering::Equal => SchemaState::Current,
            std::cmp::Ordering::Less => SchemaState::Behind { at },
            std::cmp::Ordering::Greater => SchemaState::Ahead { at },
        }
    }
}

/// What a migration run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Migrated {
    pub(crate) from: i32,
    pub(crate) to: i32,
    /// The names of the migrations applied, in order (empty when the schema was current).
    pub(crate) applied: Vec<&'static str>,
}

/// The schema version recorded in the database (0 when it was never migrated).
async fn recorded(client: &impl tokio_postgres::GenericClient) -> Result<i32, PgError> {
    let exists = client
        .query_one("SELECT to_regclass('mailgate_schema') IS NOT NULL", &[])
        .await?
        .try_get::<_, bool>(0)?;
    if !exists {
        return Ok(0);
    }
    let row = client
        .query_one("SELECT COALESCE(max(version), 0) FROM mailgate_schema", &[])
        .await?;
    Ok(row.try_get(0)?)
}

/// Refuses a database whose schema is not this binary's: older (`mailgate index migrate`
/// brings it up; a serving process never does) or newer (this mailgate is too old for it).
pub(crate) async fn check(client: &impl tokio_postgres::GenericClient) -> Result<(), PgError> {
    match SchemaState::of(recorded(client).await?) {
        SchemaState::Current => Ok(()),
        SchemaState::Behind { at } => Err(PgError::SchemaBehind {
            at,
            known: SCHEMA_VERSION,
        }),
        SchemaState::Ahead { at } => Err(PgError::SchemaAhead {
            at,
            known: SCHEMA_VERSION,
        }),
    }
}

/// What the schema needs that only a superuser can grant, done here when `migrate` runs as one
/// and refused otherwise, naming the statements, before any table is made:
/// - pgvector, which is not a trusted extension;
/// - `ts_match_vq` (`tsvector @@ tsquery`) marked LEAKPROOF. Row-level security lets the
///   planner use an index for a condition only when its function is leakproof, so without it
///   every text match is a sequential scan of every mailbox's rows (measured: 100 to 300 times
///   slower at 100,000 messages). The function returns whether a vector matches a query and
///   raises no error that depends on either, which is what LEAKPROOF asserts.
async fn superuser_steps(tx: &tokio_postgres::Transaction<'_>) -> Result<(), PgError> {
    const STEPS: [(&str, &str); 2] = [
        (
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')",
            "CREATE EXTENSION IF NOT EXISTS vector",
        ),
        (
            "SELECT proleakproof FROM pg_proc
              WHERE oid = 'ts_match_vq(tsvector, tsquery)'::regprocedure",
            "ALTER FUNCTION ts_match_vq(tsvector, tsquery) LEAKPROOF",
        ),
    ];
    for (done, step) in STEPS {
        if tx.query_one(done, &[]).await?.try_get::<_, bool>(0)? {
            continue;
        }
        // Tried in a savepoint: a role without the privilege gets the refusal below, not an
        // aborted transaction.
        let attempt = tx
            .batch_execute(&format!("SAVEPOINT step; {step}; RELEASE step"))
            .await;
        if attempt.is_err() {
            tx.batch_execute("ROLLBACK TO SAVEPOINT step").await?;
            return Err(PgError::NeedsSuperuser);
        }
    }
    Ok(())
}

/// Run as a superuser, makes the rest of the transaction act as the database's owner, so the
/// schema belongs to the role mailgate serves as (the tables' owner, whom forced row security
/// binds, and who creates a vector size's HNSW index) rather than to the superuser. A database
/// a superuser owns is refused: the tables would be a superuser's too, and the role mailgate
/// serves as (never one: [`super::role`]) could not use them.
async fn act_as_owner(tx: &tokio_postgres::Transaction<'_>) -> Result<(), PgError> {
    let row = tx
        .query_one(
            "SELECT me.rolsuper, owner.rolsuper, owner.rolname::text
               FROM pg_roles me, pg_database d JOIN pg_roles owner ON owner.oid = d.datdba
              WHERE me.rolname = current_user AND d.datname = current_database()",
            &[],
        )
        .await?;
    let (superuser, owner_superuser, owner): (bool, bool, String) =
        (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
    if !superuser {
        return Ok(());
    }
    if owner_superuser {
        return Err(PgError::OwnerIsSuperuser);
    }
    // The owner's name is quoted as an identifier, so any name is one role's.
    tx.batch_execute(&format!(
        "SET LOCAL ROLE \"{}\"",
        owner.replace('"', "\"\"")
    ))
    .await?;
    Ok(())
}

/// Applies every pending migration in one transaction. A schema newer than this binary is
/// refused, and nothing is changed.
pub(crate) async fn migrate(client: &mut tokio_postgres::Client) -> Result<Migrated, PgError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])
        .await?;
    let from = recorded(&tx).await?;
    if let SchemaState::Ahead { at } = SchemaState::of(from) {
        return Err(PgError::SchemaAhead {
            at,
            known: SCHEMA_VERSION,
        });
    }
    superuser_steps(&tx).await?;
    act_as_owner(&tx).await?;
    tx.batch_execute(CREATE_VERSIONS).await?;
    let mut applied = Vec::new();
    for migration in MIGRATIONS.iter().filter(|m| m.version > from) {
        tx.batch_execute(migration.sql).await?;
        tx.execute(
            "INSERT INTO mailgate_schema (version, name) VALUES ($1, $2)",
            &[&migration.version, &migration.name],
        )
        .await?;
        applied.push(migration.name);
    }
    tx.commit().await?;
    Ok(Migrated {
        from,
        to: SCHEMA_VERSION,
        applied,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_superuser_migrates_as_the_databases_owner_and_never_makes_a_superusers_schema() {
        use super::super::testdb::fresh_as_superuser;
        let Some(db) = fresh_as_superuser(
            "migrate_owner",
            std::time::Duration::from_secs(60),
            super::super::RoleCheck::Enforced,
        )
        .await
        else {
            return;
        };
        let (mut client, note) = super::super::connect_to_migrate(&db.settings)
            .await
            .expect("connect");
        assert!(note.is_some(), "a superuser is named as one");
        let done = migrate(&mut client).await.expect("as the owner");
        assert!(done.applied.is_empty(), "already current");
        let me: String = client
            .query_one("SELECT current_user::text", &[])
            .await
            .expect("ask")
            .get(0);
        assert_eq!(
            me, db.settings.user,
            "only its transaction acted as the owner"
        );
        let rename = format!(
            "ALTER DATABASE {} OWNER TO {}",
            db.owner.database, db.settings.user
        );
        db.client
            .batch_execute(&rename)
            .await
            .expect("give it away");
        assert!(matches!(
            migrate(&mut client).await,
            Err(PgError::OwnerIsSuperuser)
        ));
    }

    #[tokio::test]
    async fn a_database_of_an_older_version_is_refused_until_migrate_applies_what_is_pending() {
        let Some(mut clients) = super::super::testdb::fresh("migrate_upgrade", 1).await else {
            return;
        };
        let client = &mut clients[0];
        // As the mailgate before long bodies' chunks and shared grants left it.
        client
            .batch_execute(
                "DROP TABLE mailgate_body_lexemes; DROP TABLE mailgate_grants;
                 DELETE FROM mailgate_schema WHERE version >= 2",
            )
            .await
            .expect("back to version 1");
        assert!(matches!(
            check(&*client).await,
            Err(PgError::SchemaBehind { at: 1, known: 3 })
        ));
        let done = migrate(client).await.expect("migrate");
        assert_eq!(
            done,
            Migrated {
                from: 1,
                to: 3,
                applied: vec!["long bodies", "shared grants"]
            }
        );
        check(&*client).await.expect("current");
        for table in ["mailgate_body_lexemes", "mailgate_grants"] {
            let forced: bool = client
                .query_one(
                    "SELECT relrowsecurity AND relforcerowsecurity FROM pg_class
                      WHERE oid = $1::text::regclass",
                    &[&table],
                )
                .await
                .expect("the new table")
                .get(0);
            assert!(forced, "{table}");
        }
    }

    #[test]
    fn migrations_are_numbered_from_one_without_gaps_up_to_the_schema_version() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i32 + 1, "{}", m.name);
        }
        assert_eq!(MIGRATIONS.last().map(|m| m.version), Some(SCHEMA_VERSION));
        assert_eq!(SchemaState::of(0), SchemaState::Behind { at: 0 });
        assert_eq!(SchemaState::of(SCHEMA_VERSION), SchemaState::Current);
        assert_eq!(
            SchemaState::of(SCHEMA_VERSION + 1),
            SchemaState::Ahead {
                at: SCHEMA_VERSION + 1
            }
        );
    }
}
