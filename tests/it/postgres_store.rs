//! The shared index store's own behaviour on a real PostgreSQL 18 with pgvector (the harness is
//! [`crate::stores`]): `mailgate index migrate` creates the versioned schema on a fresh database
//! and is then a no-op, two at once apply it once, row-level security keeps a session to the
//! mailbox it names (as the non-superuser role that owns the tables), and the store's settings
//! refuse a password in the URL and an unreachable database naming the variable without
//! showing a secret. Each test makes a database of its own. What the index does for a mailbox
//! (sync, search, pause, purge, interruptions) is tested over both stores by the `index*`
//! modules.

use crate::stores::{connect, fresh_database, server};
use crate::util::{World, config_over_shared_demo};

async fn mailgate(
    world: &World,
    env: &[(String, String)],
    args: &[&str],
) -> (bool, String, String) {
    let extra: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = world.run_with(&extra, args).await;
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn index_migrate_creates_the_versioned_schema_once() {
    let Some(server) = server("index_migrate_creates_the_versioned_schema_once").await else {
        return;
    };
    let db = fresh_database(server, "migrate").await;
    let (url, env) = (db.url, db.env);
    let world = World::new();
    let config = config_over_shared_demo(&world, &[crate::util::FINANCE], "");
    let migrate = ["index", "migrate", "--config", &config];
    let (ok, out, err) = mailgate(&world, &env, &migrate).await;
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "schema: version 0 -> 1 (applied: shared index)");
    let (ok, out, err) = mailgate(&world, &env, &migrate).await;
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "schema: version 1, up to date");
    // Two operators at once: one applies it, the other finds it current.
    let world_two = World::new();
    let env_two = fresh_database(server, "migrate_race").await.env;
    let config_two = config_over_shared_demo(&world_two, &[crate::util::FINANCE], "");
    let migrate_two = ["index", "migrate", "--config", &config_two];
    let (a, b) = tokio::join!(
        mailgate(&world_two, &env_two, &migrate_two),
        mailgate(&world_two, &env_two, &migrate_two)
    );
    assert!(a.0 && b.0, "{} {}", a.2, b.2);
    let outs = [a.1.trim(), b.1.trim()];
    assert!(
        outs.contains(&"schema: version 0 -> 1 (applied: shared index)")
            && outs.contains(&"schema: version 1, up to date"),
        "{outs:?}"
    );
    let db = connect(&url).await;
    let versions: Vec<i32> = db
        .query("SELECT version FROM mailgate_schema ORDER BY version", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, [1]);

    // A database where `tsvector @@ tsquery` is not leakproof (a superuser must mark it): the
    // owning role's migrate refuses, naming the statement, and creates nothing.
    let db = fresh_database(server, "migrate_leaky").await;
    connect(&db.admin_url)
        .await
        .batch_execute("ALTER FUNCTION ts_match_vq(tsvector, tsquery) NOT LEAKPROOF")
        .await
        .unwrap();
    let world = World::new();
    let config = config_over_shared_demo(&world, &[crate::util::FINANCE], "");
    let (ok, out, err) =
        mailgate(&world, &db.env, &["index", "migrate", "--config", &config]).await;
    assert!(!ok, "{out}");
    assert!(
        err.contains("ALTER FUNCTION ts_match_vq(tsvector, tsquery) LEAKPROOF"),
        "{err}"
    );
    let tables: i64 = connect(&db.url)
        .await
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'mailgate%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 0, "nothing was created");
}

#[tokio::test]
async fn row_level_security_keeps_a_session_to_the_mailbox_it_names() {
    let Some(server) = server("row_level_security_keeps_a_session_to_the_mailbox_it_names").await
    else {
        return;
    };
    let db = fresh_database(server, "rls").await;
    let (url, env) = (db.url, db.env);
    let world = World::new();
    let config = config_over_shared_demo(&world, &[crate::util::FINANCE], "");
    let (ok, _, err) = mailgate(&world, &env, &["index", "migrate", "--config", &config]).await;
    assert!(ok, "{err}");
    // As the role that owns the tables (not a superuser): forced row security binds it too.
    let db = connect(&url).await;
    let insert = "INSERT INTO mailgate_mailboxes (mailbox, analyzer, status) VALUES ($1, 1, '{}')";
    for mailbox in ["sha256:a", "sha256:b"] {
        db.batch_execute(&format!("SET mailgate.mailbox = '{mailbox}'"))
            .await
            .unwrap();
        db.execute(insert, &[&mailbox]).await.unwrap();
    }
    let visible = |rows: Vec<tokio_postgres::Row>| -> Vec<String> {
        rows.iter().map(|r| r.get::<_, String>(0)).collect()
    };
    db.batch_execute("SET mailgate.mailbox = 'sha256:a'")
        .await
        .unwrap();
    let rows = db
        .query("SELECT mailbox FROM mailgate_mailboxes", &[])
        .await
        .unwrap();
    assert_eq!(
        visible(rows),
        ["sha256:a"],
        "only the mailbox the session names"
    );
    // Writing another mailbox's row is refused, not silently dropped.
    let e = db.execute(insert, &[&"sha256:c"]).await.unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("42501"), "{e}");
    // Row security still lets the planner match text on the GIN indexes: only a leakproof
    // function may be evaluated before the policy, as an index condition (migrate refuses a
    // database where it is not; see index_migrate_creates_the_versioned_schema_once).
    let leakproof: bool = db
        .query_one(
            "SELECT proleakproof FROM pg_proc WHERE oid = 'ts_match_vq(tsvector, tsquery)'::regprocedure",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(leakproof);
    // A session that names none sees none.
    db.batch_execute("RESET mailgate.mailbox").await.unwrap();
    let rows = db
        .query("SELECT mailbox FROM mailgate_mailboxes", &[])
        .await
        .unwrap();
    assert!(visible(rows).is_empty());
}

#[tokio::test]
async fn the_store_settings_refuse_what_they_must_without_showing_a_secret() {
    let world = World::new();
    let config = config_over_shared_demo(&world, &[crate::util::FINANCE], "");
    let env = |url: &str| vec![("MAILGATE_INDEX_URL".to_owned(), url.to_owned())];
    // A password in the URL: refused before any connection, the password never shown.
    let (ok, _, err) = mailgate(
        &world,
        &env("postgres://mailgate:hunter2@127.0.0.1:9/db"),
        &["index", "migrate", "--config", &config],
    )
    .await;
    assert!(!ok);
    assert!(err.contains("MAILGATE_INDEX_URL holds a password"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    // A database nobody listens for: a clear refusal, exit 1.
    let (ok, _, err) = mailgate(
        &world,
        &env("postgres://mailgate@127.0.0.1:9/db"),
        &["index", "migrate", "--config", &config],
    )
    .await;
    assert!(!ok);
    assert!(err.contains("could not be reached"), "{err}");
    // Serving while the database is away: startup stops (a serving process checks the
    // schema first), naming the variable.
    let (ok, out, err) = mailgate(
        &world,
        &env("postgres://mailgate@127.0.0.1:9/db"),
        &["tools", "--config", &config],
    )
    .await;
    assert!(!ok, "{out}");
    assert!(
        err.contains("MAILGATE_INDEX_URL") && err.contains("could not be reached"),
        "{err}"
    );
    // Migrating without a database: nothing to do, said so.
    let (ok, _, err) = mailgate(&world, &[], &["index", "migrate", "--config", &config]).await;
    assert!(!ok);
    assert!(err.contains("MAILGATE_INDEX_URL is not set"), "{err}");
}
