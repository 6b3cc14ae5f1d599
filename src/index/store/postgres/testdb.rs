//! Unit tests' PostgreSQL (test builds only): a fresh, migrated database of the test server
//! `scripts/postgres.sh` runs, named by `MAILGATE_TEST_PG_URL` (the owning role `mailgate`;
//! `MAILGATE_TEST_PG_ADMIN_URL` for the superuser; `scripts/test.sh` exports both).
//! Without it a test says SKIP and passes, unless the PostgreSQL tests are required (CI, or
//! `MAILGATE_PG_TESTS=require`), where it fails.

use crate::config::env::Env;

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("the test server answers");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// A fresh database with this binary's schema: `connections` clients to it, or `None` (after a
/// loud SKIP) when no test server is named and none is required.
pub(crate) async fn fresh(test: &str, connections: usize) -> Option<Vec<tokio_postgres::Client>> {
    fresh_named(test, connections).await.map(|(_, _, c)| c)
}

/// A fresh database with this binary's schema, as the store's settings name it (for the store's
/// own connections), with one client to it.
pub(crate) async fn fresh_settings(
    test: &str,
    lease_ttl: std::time::Duration,
) -> Option<(super::PgSettings, tokio_postgres::Client)> {
    let (url, name, mut clients) = fresh_named(test, 1).await?;
    let settings = super::PgSettings::for_test(&url, &name, lease_ttl);
    Some((settings, clients.pop().expect("one client")))
}

/// A fresh database with this binary's schema (made and migrated as the owning role, as a
/// deployment does), as the test server's superuser sees it: the store's settings as the
/// superuser (their role check as `check` says), the owning role's, and a superuser client.
/// `None` (after a loud SKIP) as [`fresh`], or when `MAILGATE_TEST_PG_ADMIN_URL` is not set
/// (`scripts/postgres.sh env` prints both).
pub(crate) async fn fresh_as_superuser(
    test: &str,
    lease_ttl: std::time::Duration,
    check: super::RoleCheck,
) -> Option<Superuser> {
    let env = Env::capture().expect("the environment");
    let Some(admin_url) = env.get("MAILGATE_TEST_PG_ADMIN_URL").map(str::to_owned) else {
        skip(test, &env, "MAILGATE_TEST_PG_ADMIN_URL");
        return None;
    };
    let (url, name, _) = fresh_named(test, 1).await?;
    let mut superuser = super::PgSettings::for_test(&admin_url, &name, lease_ttl);
    superuser.role_check = check;
    let mut config: tokio_postgres::Config = admin_url.parse().expect("the admin URL");
    config.dbname(&name);
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connect to the test database as the superuser");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Some(Superuser {
        settings: superuser,
        owner: super::PgSettings::for_test(&url, &name, lease_ttl),
        client,
    })
}

/// A test database as [`fresh_as_superuser`] opens it.
pub(crate) struct Superuser {
    /// The store's settings as the superuser.
    pub(crate) settings: super::PgSettings,
    /// As the role that owns the tables (`mailgate`, no superuser, no BYPASSRLS).
    pub(crate) owner: super::PgSettings,
    /// A superuser connection to the database: sees every mailbox's rows.
    pub(crate) client: tokio_postgres::Client,
}

/// Says loudly why a test does nothing, or fails it where the PostgreSQL tests are required.
#[expect(clippy::print_stderr, reason = "a skipped test says why, loudly")]
fn skip(test: &str, env: &Env, var: &str) {
    let required = env.get("CI").is_some() || env.get("MAILGATE_PG_TESTS") == Some("require");
    assert!(
        !required,
        "{test}: the PostgreSQL tests must run here, but {var} is not set \
         (eval \"$(scripts/postgres.sh env)\")"
    );
    eprintln!("!!! SKIP {test}: {var} is not set (scripts/postgres.sh up)");
}

async fn fresh_named(
    test: &str,
    connections: usize,
) -> Option<(String, String, Vec<tokio_postgres::Client>)> {
    let env = Env::capture().expect("the environment");
    let Some(url) = env.get("MAILGATE_TEST_PG_URL").map(str::to_owned) else {
        skip(test, &env, "MAILGATE_TEST_PG_URL");
        return None;
    };
    let admin = connect(&url).await;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .subsec_nanos();
    let name = format!(
        "u_{}_{}_{nanos}",
        &test[..test.len().min(24)],
        std::process::id()
    );
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create the test database");
    let mut config: tokio_postgres::Config = url.parse().expect("the test URL");
    config.dbname(&name);
    let mut clients = Vec::with_capacity(connections);
    for _ in 0..connections.max(1) {
        let (client, connection) = config
            .connect(tokio_postgres::NoTls)
            .await
            .expect("connect to the test database");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        clients.push(client);
    }
    super::migrations::migrate(&mut clients[0])
        .await
        .expect("migrate the test database");
    Some((url, name, clients))
}
