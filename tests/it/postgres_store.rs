//! The shared index store's own behaviour on a real PostgreSQL 18 with pgvector (the harness is
//! [`crate::stores`]): `mailgate index migrate` creates the versioned schema on a fresh database
//! and is then a no-op, two at once apply it once, row-level security keeps a session to the
//! mailbox it names (as the non-superuser role that owns the tables), every command but `index
//! migrate` refuses a role row-level security does not bind (a superuser, BYPASSRLS, or a member
//! of a role with either) naming the rule, and the store's settings refuse a password in the URL
//! and an unreachable database naming the variable without showing a secret. Each test makes a
//! database of its own. What the index does for a mailbox
//! (sync, search, pause, purge, interruptions) is tested over both stores by the `index*`
//! modules.

use crate::stores::{Database, connect, fresh_database, server};
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
    assert_eq!(
        out.trim(),
        "schema: version 0 -> 3 (applied: shared index, long bodies, shared grants)"
    );
    let (ok, out, err) = mailgate(&world, &env, &migrate).await;
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "schema: version 3, up to date");
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
        outs.contains(
            &"schema: version 0 -> 3 (applied: shared index, long bodies, shared grants)"
        ) && outs.contains(&"schema: version 3, up to date"),
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
    assert_eq!(versions, [1, 2, 3]);

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

/// The environment that points mailgate at `db` as `user` with `password` (in a variable).
fn env_as(db: &Database, user: &str, password: &str) -> Vec<(String, String)> {
    let config: tokio_postgres::Config = db.url.parse().unwrap();
    let port = config.get_ports()[0];
    let name = config.get_dbname().unwrap();
    vec![
        (
            "MAILGATE_INDEX_URL".to_owned(),
            format!("postgres://{user}@127.0.0.1:{port}/{name}"),
        ),
        (
            "MAILGATE_INDEX_PASSWORD_ENV".to_owned(),
            "TEST_INDEX_PASSWORD".to_owned(),
        ),
        ("TEST_INDEX_PASSWORD".to_owned(), password.to_owned()),
    ]
}

/// The superuser's environment for `db` (the test server's `postgres`).
fn superuser_env(db: &Database) -> Vec<(String, String)> {
    let admin: tokio_postgres::Config = db.admin_url.parse().unwrap();
    let password = String::from_utf8_lossy(admin.get_password().unwrap()).into_owned();
    env_as(db, admin.get_user().unwrap(), &password)
}

/// Every command that opens the store, over `config`.
fn store_commands(config: &str) -> Vec<Vec<&str>> {
    let with = |args: &[&'static str]| {
        let mut out: Vec<&str> = args.to_vec();
        out.extend(["--config", config]);
        out
    };
    vec![
        with(&["serve"]),
        with(&["tools"]),
        with(&["index", "sync"]),
        with(&["index", "sync", "finance"]),
        with(&["index", "status"]),
        with(&["index", "pause", "finance"]),
        with(&["index", "resume", "finance"]),
        with(&["index", "rebuild", "finance"]),
        with(&["index", "purge", "finance"]),
    ]
}

/// Runs every store command of [`store_commands`] with `env`: each fails, saying `rule` and
/// how to make the right role, in one line that shows no URL, host or password.
async fn all_refused(world: &World, env: &[(String, String)], config: &str, rule: &str) {
    for args in store_commands(config) {
        let (ok, out, err) = mailgate(world, env, &args).await;
        assert!(!ok, "{args:?} ran: {out}");
        let line = err.trim();
        assert!(
            line.contains(rule)
                && line.contains("CREATE ROLE mailgate LOGIN NOSUPERUSER NOBYPASSRLS")
                && line.contains("docs/deployment.md"),
            "{args:?}: {line}"
        );
        assert_eq!(line.lines().count(), 1, "{args:?}: {line}");
        let password = &env[2].1;
        assert!(
            !line.contains("postgres://")
                && !line.contains("127.0.0.1")
                && !line.contains(password.as_str()),
            "{args:?}: {line}"
        );
    }
}

/// The rows of the index tables of every mailbox, as the superuser counts them.
async fn index_rows(db: &Database) -> i64 {
    connect(&db.admin_url)
        .await
        .query_one(
            "SELECT (SELECT count(*) FROM mailgate_mailboxes) + (SELECT count(*) FROM mailgate_messages)
                  + (SELECT count(*) FROM mailgate_leases)",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn a_superuser_may_migrate_and_nothing_else() {
    let Some(server) = server("a_superuser_may_migrate_and_nothing_else").await else {
        return;
    };
    let db = fresh_database(server, "superuser").await;
    let superuser = superuser_env(&db);
    let world = World::new();
    let config =
        config_over_shared_demo(&world, &[crate::util::FINANCE, crate::util::PERSONAL], "");
    // `index migrate` may run as one (the extension and LEAKPROOF steps need it), and says so;
    // the schema still belongs to the database's owner, the role mailgate serves as.
    let (ok, out, err) = mailgate(
        &world,
        &superuser,
        &["index", "migrate", "--config", &config],
    )
    .await;
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.trim().lines().collect();
    assert_eq!(
        lines[0],
        "schema: version 0 -> 3 (applied: shared index, long bodies, shared grants)"
    );
    assert!(
        lines.len() == 2 && lines[1].starts_with("note: migrated as a superuser"),
        "{out}"
    );
    let owners: Vec<String> = connect(&db.url)
        .await
        .query(
            "SELECT DISTINCT tableowner::text FROM pg_tables WHERE tablename LIKE 'mailgate%'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(owners, ["mailgate"]);
    // Everything else refuses it, before reading or writing anything.
    all_refused(&world, &superuser, &config, "is a superuser").await;
    assert_eq!(index_rows(&db).await, 0, "nothing was written");
    // The owning role syncs and serves the schema the superuser made.
    let (ok, out, err) = mailgate(&world, &db.env, &["index", "sync", "--config", &config]).await;
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("finance: complete") && out.contains("personal: complete"),
        "{out}"
    );
    let (ok, out, err) = mailgate(&world, &db.env, &["index", "status", "--config", &config]).await;
    assert!(ok, "{out}{err}");
    // Migrating again as the superuser: up to date, and said so again.
    let (ok, out, err) = mailgate(
        &world,
        &superuser,
        &["index", "migrate", "--config", &config],
    )
    .await;
    assert!(ok, "{err}");
    assert!(
        out.starts_with("schema: version 3, up to date\nnote: migrated as a superuser"),
        "{out}"
    );
}

#[tokio::test]
async fn a_role_that_may_act_as_one_row_security_does_not_bind_is_refused() {
    let Some(server) =
        server("a_role_that_may_act_as_one_row_security_does_not_bind_is_refused").await
    else {
        return;
    };
    let db = fresh_database(server, "bypassrls").await;
    let world = World::new();
    let config = config_over_shared_demo(&world, &[crate::util::FINANCE], "");
    let (ok, _, err) = mailgate(&world, &db.env, &["index", "migrate", "--config", &config]).await;
    assert!(ok, "{err}");
    // Roles belong to the server, not the database: named after this test's database, and
    // dropped at the end (the server's script drops none).
    let name = db.url.rsplit('/').next().unwrap().to_owned();
    let (bypass, member, direct) = (
        format!("{name}_bypass"),
        format!("{name}_member"),
        format!("{name}_direct"),
    );
    let admin = connect(&db.admin_url).await;
    admin
        .batch_execute(&format!(
            "CREATE ROLE {bypass} NOLOGIN NOSUPERUSER BYPASSRLS;
             CREATE ROLE {member} LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD 'member-pw' IN ROLE {bypass};
             CREATE ROLE {direct} LOGIN NOSUPERUSER BYPASSRLS PASSWORD 'direct-pw';"
        ))
        .await
        .unwrap();
    let member_env = env_as(&db, &member, "member-pw");
    let direct_env = env_as(&db, &direct, "direct-pw");
    // NOBYPASSRLS itself, but a member of a role that has it: it could SET ROLE to it.
    let (ok, out, member_err) =
        mailgate(&world, &member_env, &["index", "sync", "--config", &config]).await;
    assert!(!ok, "{out}");
    let (ok, out, status_err) = mailgate(
        &world,
        &member_env,
        &["index", "status", "--config", &config],
    )
    .await;
    assert!(!ok, "{out}");
    let (ok, out, serve_err) = mailgate(&world, &member_env, &["serve", "--config", &config]).await;
    assert!(!ok, "{out}");
    let (ok, out, direct_err) =
        mailgate(&world, &direct_env, &["index", "sync", "--config", &config]).await;
    assert!(!ok, "{out}");
    admin
        .batch_execute(&format!(
            "DROP ROLE {member}; DROP ROLE {direct}; DROP ROLE {bypass};"
        ))
        .await
        .unwrap();
    for err in [&member_err, &status_err, &serve_err] {
        assert!(
            err.contains("is a member of a role with BYPASSRLS")
                && err.contains("CREATE ROLE mailgate LOGIN NOSUPERUSER NOBYPASSRLS"),
            "{err}"
        );
        assert!(!err.contains("member-pw"), "{err}");
    }
    assert!(direct_err.contains("has BYPASSRLS"), "{direct_err}");
    assert_eq!(index_rows(&db).await, 0, "nothing was written");
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
