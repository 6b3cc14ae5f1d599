//! The index stores the integration tests run over: [`Store::Local`] (tantivy and redb in the
//! state folder) and [`Store::Shared`] (a database of the test's own on the PostgreSQL 18 test
//! server of `scripts/postgres.sh`, which this harness starts when it is not running). One test
//! body runs over both through [`both_stores!`]: every `mailgate` process the test starts gets
//! the store's environment (through the [`World`] from [`Store::world`] or [`Store::apply`]),
//! and the few facts a test reads or plants behind mailgate's back (the status a sync left,
//! the rows of a mailbox) go through [`Store`], so the assertions stay the same.
//!
//! Where the PostgreSQL tests are required (env `CI` set, or `MAILGATE_PG_TESTS=require`) a
//! server that cannot start fails the test; elsewhere the test prints `!!! SKIP` and passes.
//! Databases are named `t_<label>_<pid>_<nanos>`; those of test processes that are gone are
//! dropped when the first test of a process finds the server.

use std::path::Path;

use serde_json::Value;

use crate::util::World;

/// The test server's URLs, as `scripts/postgres.sh env` prints them (with their passwords: test
/// credentials of a loopback server).
pub(crate) struct PgServer {
    /// As the non-superuser role `mailgate`.
    pub(crate) url: String,
    /// As the superuser `postgres` (row-level security does not bind it).
    pub(crate) admin_url: String,
}

fn script(arg: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/postgres.sh"),
    );
    cmd.arg(arg);
    cmd
}

/// Whether a missing server fails the test (CI, or `MAILGATE_PG_TESTS=require`).
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
    let var = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("export {name}=")))
            .map(|v| v.trim().to_owned())
            .ok_or(format!("scripts/postgres.sh env printed no {name}"))
    };
    Ok(PgServer {
        url: var("MAILGATE_TEST_PG_URL")?,
        admin_url: var("MAILGATE_TEST_PG_ADMIN_URL")?,
    })
}

/// The test server, or `None` (after a SKIP line naming `test`) when it is not there and not
/// required; panics when it is required and not there.
#[expect(clippy::print_stderr, reason = "a skipped test says why, loudly")]
pub(crate) async fn server(test: &str) -> Option<&'static PgServer> {
    static SERVER: tokio::sync::OnceCell<Result<PgServer, String>> =
        tokio::sync::OnceCell::const_new();
    let found = SERVER
        .get_or_init(async || {
            let found = tokio::task::spawn_blocking(find).await.unwrap();
            if let Ok(server) = &found {
                drop_leftovers(server).await;
            }
            found
        })
        .await;
    match found {
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

pub(crate) async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("the test server answers");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// Drops the test databases (`t_…_<pid>_<nanos>`, and the unit tests' `u_…`) of test processes
/// that are gone. A database
/// still in use is left alone (a plain `DROP DATABASE` refuses it).
async fn drop_leftovers(server: &PgServer) {
    let db = connect(&server.url).await;
    let names: Vec<String> = db
        .query(
            "SELECT datname FROM pg_database WHERE datname LIKE 't\\_%' OR datname LIKE 'u\\_%'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    for name in names {
        let mut parts = name.rsplit('_');
        let (Some(_nanos), Some(pid)) = (parts.next(), parts.next()) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = db
                .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
                .await;
        }
    }
}

/// A fresh database of a test's own, owned by `mailgate`.
#[derive(Clone)]
pub(crate) struct Database {
    /// To it as `mailgate`, with the password (the test's own connections).
    pub(crate) url: String,
    /// To it as the superuser: reads every mailbox's rows.
    pub(crate) admin_url: String,
    /// The environment that points mailgate at it (the password in a variable, never in the
    /// URL).
    pub(crate) env: Vec<(String, String)>,
    /// Set once [`Store::migrate`] created the schema (the clones of a store share it).
    migrated: std::sync::Arc<tokio::sync::OnceCell<()>>,
}

/// Creates a database named after `label` (cut to fit PostgreSQL's 63-byte names).
pub(crate) async fn fresh_database(server: &PgServer, label: &str) -> Database {
    let admin = connect(&server.url).await;
    let label: String = label
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(32)
        .collect::<String>()
        .to_ascii_lowercase();
    let name = format!(
        "t_{label}_{}_{}",
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
    let admin_config: tokio_postgres::Config = server.admin_url.parse().unwrap();
    let admin_user = admin_config.get_user().unwrap_or("postgres");
    let admin_password = admin_config
        .get_password()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .unwrap_or_default();
    Database {
        url: format!("postgres://mailgate:mailgate@127.0.0.1:{port}/{name}"),
        admin_url: format!("postgres://{admin_user}:{admin_password}@127.0.0.1:{port}/{name}"),
        env: vec![
            (
                "MAILGATE_INDEX_URL".to_owned(),
                format!("postgres://mailgate@127.0.0.1:{port}/{name}"),
            ),
            (
                "MAILGATE_INDEX_PASSWORD_ENV".to_owned(),
                "TEST_INDEX_PASSWORD".to_owned(),
            ),
            ("TEST_INDEX_PASSWORD".to_owned(), "mailgate".to_owned()),
        ],
        migrated: std::sync::Arc::default(),
    }
}

/// Where a test's `mailgate` keeps its indexes.
#[derive(Clone)]
pub(crate) enum Store {
    /// The state folder (no store variable set).
    Local,
    /// A fresh database of the test's own (schema not created yet: [`Store::migrate`]).
    Shared(Database),
}

impl Store {
    /// A fresh database named after `test` on the test server, or `None` (after a SKIP line)
    /// when there is none and none is required.
    pub(crate) async fn shared(test: &str) -> Option<Store> {
        let server = server(test).await?;
        let label = test.rsplit("::").nth(1).unwrap_or(test);
        Some(Store::Shared(fresh_database(server, label).await))
    }

    pub(crate) fn is_shared(&self) -> bool {
        matches!(self, Store::Shared(_))
    }

    /// The environment that selects the store (none for the local one).
    pub(crate) fn env(&self) -> Vec<(&str, &str)> {
        match self {
            Store::Local => Vec::new(),
            Store::Shared(db) => db
                .env
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect(),
        }
    }

    /// `world` with the store's environment, so every process it starts uses the store.
    pub(crate) fn apply(&self, world: World) -> World {
        self.env()
            .into_iter()
            .fold(world, |world, (k, v)| world.with(k, v))
    }

    /// A fresh [`World`] whose processes use the store.
    pub(crate) fn world(&self) -> World {
        self.apply(World::new())
    }

    /// The line `index status` ends with, naming the store.
    pub(crate) fn status_line(&self) -> &'static str {
        match self {
            Store::Local => "store: local",
            Store::Shared(_) => "store: postgres",
        }
    }

    /// Creates the shared store's schema once (`mailgate --config CONFIG index migrate` with
    /// the store's environment; cases that share a database share its schema); nothing to do
    /// for the local store.
    pub(crate) async fn migrate(&self, world: &World, config: &str) {
        let Store::Shared(db) = self else {
            return;
        };
        db.migrated
            .get_or_init(async || {
                let out = world
                    .run_with(&self.env(), &["--config", config, "index", "migrate"])
                    .await;
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success() && stdout.contains("schema: version 0 -> 3"),
                    "index migrate: {stdout}{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            })
            .await;
    }

    /// A superuser connection to the shared store's database.
    async fn admin(&self) -> tokio_postgres::Client {
        match self {
            Store::Local => panic!("the local store has no database"),
            Store::Shared(db) => connect(&db.admin_url).await,
        }
    }

    /// The status the last sync of `mailbox` left (`status.json` of its alias in `world`'s
    /// state folder, or its row in the database); `Null` when there is none.
    pub(crate) async fn status(&self, world: &World, mailbox: &Mailbox) -> Value {
        match self {
            Store::Local => {
                let path = local_status(world, &mailbox.alias);
                std::fs::read(&path)
                    .map(|b| serde_json::from_slice(&b).unwrap())
                    .unwrap_or(Value::Null)
            }
            Store::Shared(_) => {
                let row = self
                    .admin()
                    .await
                    .query_opt(
                        "SELECT status::text FROM mailgate_mailboxes WHERE mailbox = $1",
                        &[&mailbox.identity()],
                    )
                    .await
                    .unwrap();
                row.and_then(|r| r.get::<_, Option<String>>(0))
                    .map_or(Value::Null, |s| serde_json::from_str(&s).unwrap())
            }
        }
    }

    /// Replaces the status of `mailbox` behind mailgate's back (as if a sync had written it).
    pub(crate) async fn set_status(&self, world: &World, mailbox: &Mailbox, status: &Value) {
        match self {
            Store::Local => std::fs::write(
                local_status(world, &mailbox.alias),
                serde_json::to_vec(status).unwrap(),
            )
            .unwrap(),
            Store::Shared(_) => {
                let changed = self
                    .admin()
                    .await
                    .execute(
                        "UPDATE mailgate_mailboxes SET status = $2::text::jsonb WHERE mailbox = $1",
                        &[&mailbox.identity(), &status.to_string()],
                    )
                    .await
                    .unwrap();
                assert_eq!(
                    changed, 1,
                    "the shared store holds no row of {}",
                    mailbox.alias
                );
            }
        }
    }

    /// Ends the lease a sync holds on `mailbox` in the shared store now, as if its time had run
    /// out (for a sync killed with `-9`, without waiting for its expiry).
    pub(crate) async fn expire_lease(&self, mailbox: &Mailbox) {
        let ended = self
            .admin()
            .await
            .execute(
                "UPDATE mailgate_leases SET expires_at = clock_timestamp() WHERE mailbox = $1",
                &[&mailbox.identity()],
            )
            .await
            .unwrap();
        assert_eq!(ended, 1, "no lease of {} to end", mailbox.alias);
    }

    /// Rows the shared store holds of `mailbox`, per table of its index (those with rows only).
    /// Its lease is not counted: that row names a holder and an expiry, no mail, and outlives
    /// the index (a purge takes the lease, and leaves it expired).
    pub(crate) async fn rows_of(&self, mailbox: &Mailbox) -> Vec<(&'static str, i64)> {
        const TABLES: [&str; 8] = [
            "mailgate_mailboxes",
            "mailgate_messages",
            "mailgate_folder_counts",
            "mailgate_vectors",
            "mailgate_folder_state",
            "mailgate_versions",
            "mailgate_pending",
            "mailgate_seen",
        ];
        let db = self.admin().await;
        let mut counts = Vec::new();
        for table in TABLES {
            let n: i64 = db
                .query_one(
                    &format!("SELECT count(*) FROM {table} WHERE mailbox = $1"),
                    &[&mailbox.identity()],
                )
                .await
                .unwrap()
                .get(0);
            if n > 0 {
                counts.push((table, n));
            }
        }
        counts
    }

    /// The sizes of the vectors the shared store holds of `mailbox`, smallest first.
    pub(crate) async fn vector_sizes(&self, mailbox: &Mailbox) -> Vec<u32> {
        self.admin()
            .await
            .query(
                "SELECT DISTINCT dims FROM mailgate_vectors WHERE mailbox = $1 ORDER BY dims",
                &[&mailbox.identity()],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<_, i32>(0) as u32)
            .collect()
    }

    /// Whether any message row of the shared store (of any mailbox) holds `needle`: in a text
    /// column, a token, or the stored summary's bytes.
    pub(crate) async fn holds_text(&self, needle: &str) -> bool {
        let n: i64 = self
            .admin()
            .await
            .query_one(
                "SELECT count(*) FROM mailgate_messages m
                  WHERE strpos(m::text, $1) > 0 OR position(convert_to($1, 'UTF8') IN summary) > 0",
                &[&needle],
            )
            .await
            .unwrap()
            .get(0);
        n > 0
    }
}

/// `status.json` of `alias` in `world`'s state folder.
fn local_status(world: &World, alias: &str) -> std::path::PathBuf {
    world.state().join("index").join(alias).join("status.json")
}

/// A Maildir mailbox as the index knows it: its alias (the local store's folder) and its path
/// (the shared store keys its rows by the mailbox's identity, a digest of the path).
pub(crate) struct Mailbox {
    pub(crate) alias: String,
    pub(crate) path: std::path::PathBuf,
}

impl Mailbox {
    pub(crate) fn maildir(alias: &str, path: &Path) -> Self {
        Self {
            alias: alias.to_owned(),
            path: path.to_owned(),
        }
    }

    /// The identity the shared store keys the mailbox's rows by: mailgate's
    /// `index::status::mailbox_identity` of a Maildir, written out again here (a test that
    /// computed it wrongly finds no row, and fails).
    pub(crate) fn identity(&self) -> String {
        use sha2::Digest as _;
        use std::os::unix::ffi::OsStrExt as _;
        let mut hash = sha2::Sha256::new();
        for part in [b"maildir".as_slice(), self.path.as_os_str().as_bytes()] {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part);
        }
        format!("sha256:{}", hex::encode(hash.finalize()))
    }
}

/// Turns `async fn $case(store: Store)` (defined next to it) into the module `$case` with two
/// tests: `local` and `postgres`. The postgres one runs on a fresh database named after the
/// case, and returns after a SKIP line when there is no server and none is required. Written
/// above the case, with the case's doc comment below it (rustdoc ignores one on a macro call):
///
/// ```ignore
/// both_stores!(purge_removes_everything);
/// /// What the test shows.
/// async fn purge_removes_everything(store: Store) { … }
/// ```
macro_rules! both_stores {
    ($case:ident) => {
        mod $case {
            #[tokio::test]
            async fn local() {
                super::$case($crate::stores::Store::Local).await;
            }

            #[tokio::test]
            async fn postgres() {
                let test = concat!(module_path!(), "::postgres");
                if let Some(store) = $crate::stores::Store::shared(test).await {
                    super::$case(store).await;
                }
            }
        }
    };
}
pub(crate) use both_stores;
