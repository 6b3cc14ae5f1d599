//! The shared index store on a real PostgreSQL 18 with pgvector (`scripts/postgres.sh`, which
//! this harness starts when it is not running): `mailgate index migrate` creates the versioned
//! schema on a fresh database and is then a no-op, two at once apply it once, row-level security
//! keeps a session to the mailbox it names (as the non-superuser role that owns the tables), and
//! the store's settings refuse a password in the URL and an unreachable database naming the
//! variable without showing a secret. Each test makes a database of its
//! own. Where the PostgreSQL tests are required (CI, or `MAILGATE_PG_TESTS=require`) a server
//! that cannot start fails the test; elsewhere the test says SKIP and passes.

use std::path::Path;
use std::sync::OnceLock;

use crate::util::{World, config_over_shared_demo};

/// The test server's URLs, as `scripts/postgres.sh env` prints them (with their passwords: test
/// credentials of a loopback server).
struct PgServer {
    /// As the non-superuser role `mailgate`.
    url: String,
}

fn script(arg: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/postgres.sh"),
    );
    cmd.arg(arg);
    cmd
}

fn required() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
        || std::env::var("MAILGATE_PG_TESTS").is_ok_and(|v| v == "require")
}

fn find() -> Result<PgServer, String> {
    if let Ok(v) = std::env::var("MAILGATE_PG_TESTS")
        && v.starts_with("skip")
    {
        return Err(format!("MAILGATE_PG_TESTS={v}"));
    }
    let running = script("running")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("scripts/postgres.sh: {e}"))?
        .success();
    if !running {
        let out = script("up")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("scripts/postgres.sh up: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "scripts/postgres.sh up failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    let out = script("env")
        .output()
        .map_err(|e| format!("scripts/postgres.sh env: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let url = text
        .lines()
        .find_map(|l| l.strip_prefix("export MAILGATE_TEST_PG_URL="))
        .ok_or("scripts/postgres.sh env printed no MAILGATE_TEST_PG_URL")?;
    Ok(PgServer {
        url: url.trim().to_owned(),
    })
}

#[expect(clippy::print_stderr, reason = "a skipped test says why, loudly")]
fn server(test: &str) -> Option<&'static PgServer> {
    static SERVER: OnceLock<Result<PgServer, String>> = OnceLock::new();
    match SERVER.get_or_init(find) {
        Ok(server) => Some(server),
        Err(reason) if required() => panic!(
            "{test}: the PostgreSQL tests must run here (CI or MAILGATE_PG_TESTS=require), but: {reason}"
        ),
        Err(reason) => {
            eprintln!("!!! SKIP {test}: PostgreSQL test not run: {reason}");
            None
        }
    }
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("the test server answers");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// A fresh database of this test's own, owned by `mailgate`: its name, and the URL and extra
/// environment that point mailgate at it (the password in a variable, never in the URL).
async fn fresh_database(server: &PgServer, test: &str) -> (String, String, Vec<(String, String)>) {
    let admin = connect(&server.url).await;
    let name = format!(
        "t_{}_{}_{}",
        test.chars().take(20).collect::<String>(),
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let config: tokio_postgres::Config = server.url.parse().unwrap();
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let with_password = format!("postgres://mailgate:mailgate@127.0.0.1:{port}/{name}");
    let mailgate_url = format!("postgres://mailgate@127.0.0.1:{port}/{name}");
    let env = vec![
        ("MAILGATE_INDEX_URL".to_owned(), mailgate_url),
        (
            "MAILGATE_INDEX_PASSWORD_ENV".to_owned(),
            "TEST_INDEX_PASSWORD".to_owned(),
        ),
        ("TEST_INDEX_PASSWORD".to_owned(), "mailgate".to_owned()),
    ];
    (name, with_password, env)
}

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
    let Some(server) = server("index_migrate_creates_the_versioned_schema_once") else {
        return;
    };
    let (_, url, env) = fresh_database(server, "migrate").await;
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
    let (_, _, env_two) = fresh_database(server, "migrate_race").await;
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
}

#[tokio::test]
async fn row_level_security_keeps_a_session_to_the_mailbox_it_names() {
    let Some(server) = server("row_level_security_keeps_a_session_to_the_mailbox_it_names") else {
        return;
    };
    let (_, url, env) = fresh_database(server, "rls").await;
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
    // Serving while the database is away: the server starts (its index answers fail until
    // the database is back; the connections are opened as answers need them).
    let (ok, out, err) = mailgate(
        &world,
        &env("postgres://mailgate@127.0.0.1:9/db"),
        &["tools", "--config", &config],
    )
    .await;
    assert!(ok, "{err}");
    assert!(out.contains("search_mailbox"), "{out}");
    // Migrating without a database: nothing to do, said so.
    let (ok, _, err) = mailgate(&world, &[], &["index", "migrate", "--config", &config]).await;
    assert!(!ok);
    assert!(err.contains("MAILGATE_INDEX_URL is not set"), "{err}");
}
