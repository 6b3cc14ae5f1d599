//! Test harness: a private temp HOME with the demo mailboxes, a minimal child environment, and an
//! rmcp client over the child's stdio.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use tempfile::TempDir;

pub(crate) const EXE: &str = env!("CARGO_BIN_EXE_mailgate");

/// Fictional Graph app credentials (the reference smoke test's shapes) and closed-port endpoints.
pub(crate) const GRAPH_TEST_ENV: [(&str, &str); 5] = [
    (
        "MICROSOFT_GRAPH_TENANT_ID",
        "22222222-2222-4222-8222-222222222222",
    ),
    (
        "MICROSOFT_GRAPH_CLIENT_ID",
        "11111111-1111-4111-8111-111111111111",
    ),
    ("MICROSOFT_GRAPH_CLIENT_SECRET", "test-only-graph-secret"),
    ("MAILGATE_GRAPH_BASE_URL", "http://127.0.0.1:9/v1.0"),
    ("MAILGATE_GRAPH_LOGIN_URL", "http://127.0.0.1:9"),
];

/// One test's world: a temp dir used as HOME, cwd and MAILGATE_HOME parent.
pub(crate) struct World {
    pub(crate) dir: TempDir,
    pub(crate) env: BTreeMap<String, String>,
}

impl World {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut env = BTreeMap::new();
        env.insert("PATH".into(), "/usr/bin:/bin".into());
        env.insert("HOME".into(), dir.path().display().to_string());
        env.insert(
            "MAILGATE_HOME".into(),
            dir.path().join("state").display().to_string(),
        );
        // Graph app credentials for configs that list a Graph mailbox (startup requires them),
        // and endpoints on a closed loopback port: nothing ever leaves the machine. Tests that
        // talk to the fake Graph take its environment (`FakeGraph::env`).
        for (key, value) in GRAPH_TEST_ENV {
            env.insert(key.into(), value.into());
        }
        Self { dir, env }
    }

    /// Removes `key` from the child environment.
    pub(crate) fn without(mut self, key: &str) -> Self {
        self.env.remove(key);
        self
    }

    pub(crate) fn with(mut self, key: &str, value: &str) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Replaces the child environment with exactly `pairs` (no HOME, no MAILGATE_HOME unless
    /// given): for starting the binary as another client would, e.g. the reference plugin's
    /// smoke test. The temp dir stays the child's working directory.
    pub(crate) fn exactly(mut self, pairs: &[(&str, &str)]) -> Self {
        self.env = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(EXE);
        cmd.args(args)
            .env_clear()
            .envs(&self.env)
            .current_dir(self.dir.path());
        cmd
    }

    /// Runs the CLI to completion.
    pub(crate) async fn run(&self, args: &[&str]) -> Output {
        self.command(args)
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap()
    }

    /// Runs the CLI to completion with `extra` variables added for this run only.
    pub(crate) async fn run_with(&self, extra: &[(&str, &str)], args: &[&str]) -> Output {
        self.command(args)
            .envs(extra.iter().copied())
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap()
    }

    /// Writes a plugin.json with the given mode and points OUTLOOK_PLUGIN_CONFIG at it.
    pub(crate) fn config(mut self, json: &str, mode: u32) -> Self {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.path().join("plugin.json");
        std::fs::write(&path, json).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        self.env
            .insert("OUTLOOK_PLUGIN_CONFIG".into(), path.display().to_string());
        self
    }

    /// Starts `mailgate demo --serve` (the demo mailboxes as fixture, written afresh into this
    /// world's state folder) and connects a client. For tests that change the mailboxes; a test
    /// that only reads uses [`World::shared_demo_client`].
    pub(crate) async fn demo_client(&self) -> Client {
        self.client(&["demo", "--serve"]).await
    }

    /// Serves the process-wide read-only demo ([`shared_demo`]) with this world's environment
    /// and state folder. The write and send gates must stay closed: without their tools the
    /// server has no way to change a Maildir, so no test can disturb another's fixture.
    pub(crate) async fn shared_demo_client(&self) -> Client {
        self.shared_demo_client_with(std::process::Stdio::null())
            .await
    }

    /// [`World::shared_demo_client`] with the server's stderr captured into `path`.
    pub(crate) async fn shared_demo_client_with_stderr(&self, path: &Path) -> Client {
        let file = std::fs::File::create(path).unwrap();
        self.shared_demo_client_with(file.into()).await
    }

    /// The shared demo is only served with the write and send gates closed: without their
    /// tools the server has no way to change a Maildir.
    fn assert_read_only(&self) {
        for gate in ["PLUGIN_ALLOW_WRITES", "PLUGIN_ALLOW_SEND"] {
            assert_ne!(
                self.env.get(gate).map(String::as_str),
                Some("true"),
                "{gate}: a test that may write needs its own demo (demo_client)"
            );
        }
    }

    async fn shared_demo_client_with(&self, stderr: std::process::Stdio) -> Client {
        self.assert_read_only();
        let mut cmd = self.command(&["serve"]);
        cmd.env("OUTLOOK_PLUGIN_CONFIG", &shared_demo().config);
        spawn_client(cmd, stderr).await
    }

    /// The tools a server on the shared demo lists with this world's gates, any of them open:
    /// the session only lists and ends, so nothing can be called on the shared mailboxes.
    pub(crate) async fn shared_demo_tools(&self) -> Vec<Tool> {
        let config = shared_demo().config.display().to_string();
        let mut cmd = self.command(&["serve"]);
        cmd.env("OUTLOOK_PLUGIN_CONFIG", &config);
        let client = spawn_client(cmd, std::process::Stdio::null()).await;
        let tools = client.tools().await;
        client.close().await;
        tools
    }

    pub(crate) async fn client(&self, args: &[&str]) -> Client {
        self.client_with(args, std::process::Stdio::null()).await
    }

    /// The demo server with its stderr captured into `path`.
    pub(crate) async fn demo_client_with_stderr(&self, path: &Path) -> Client {
        let file = std::fs::File::create(path).unwrap();
        self.client_with(&["demo", "--serve"], file.into()).await
    }

    async fn client_with(&self, args: &[&str], stderr: std::process::Stdio) -> Client {
        spawn_client(self.command(args), stderr).await
    }
}

/// Starts `mailgate ARGS` with `world`'s environment plus `extra` and connects a client.
pub(crate) async fn spawn_with(world: &World, args: &[&str], extra: &[(&str, String)]) -> Client {
    let mut cmd = world.command(args);
    cmd.envs(extra.iter().map(|(k, v)| (*k, v.as_str())));
    spawn_client(cmd, std::process::Stdio::null()).await
}

async fn spawn_client(cmd: tokio::process::Command, stderr: std::process::Stdio) -> Client {
    let cmd = cmd.configure(|c| {
        c.kill_on_drop(true);
    });
    let (transport, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(stderr)
        .spawn()
        .unwrap();
    let pid = transport.id().expect("the server has a pid");
    Client {
        inner: ().serve(transport).await.unwrap(),
        pid,
    }
}

/// The demo written once per test process, for tests that never change a mailbox: its
/// `plugin.json` and Maildir root.
pub(crate) struct SharedDemo {
    pub(crate) config: PathBuf,
    pub(crate) mail: PathBuf,
}

/// The process-wide read-only demo, written on first use under `target/tmp` (a static is never
/// dropped, so a `TempDir` would outlive the run; the folder is named by pid instead, and
/// folders of test processes that are gone are removed here).
pub(crate) fn shared_demo() -> &'static SharedDemo {
    static DEMO: OnceLock<SharedDemo> = OnceLock::new();
    DEMO.get_or_init(|| {
        let parent = Path::new(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(parent).unwrap();
        for entry in std::fs::read_dir(parent).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap_or_default();
            if let Some(pid) = name.strip_prefix("shared-demo-")
                && !Path::new("/proc").join(pid).exists()
            {
                let _ = std::fs::remove_dir_all(parent.join(&name));
            }
        }
        let home = parent.join(format!("shared-demo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        mkdir_mode(&home, 0o700);
        let state = home.join("state");
        let out = std::process::Command::new(EXE)
            .args(["demo", "--serve"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &home)
            .env("MAILGATE_HOME", &state)
            .current_dir(&home)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let config = state.join("demo/plugin.json");
        assert!(config.exists(), "demo setup: {out:?}");
        SharedDemo {
            config,
            mail: state.join("demo/mail"),
        }
    })
}

/// A demo Maildir folder's message counts read from disk, independently of mailgate:
/// `(total, unread)`. A message is unread in `new/`, or in `cur/` without the `S` flag.
pub(crate) fn maildir_counts(folder: &Path) -> (usize, usize) {
    let new = sorted_names(&folder.join("new")).len();
    let cur = sorted_names(&folder.join("cur"));
    let seen = cur
        .iter()
        .filter(|name| {
            name.split_once(":2,")
                .is_some_and(|(_, flags)| flags.contains('S'))
        })
        .count();
    (new + cur.len(), new + cur.len() - seen)
}

pub(crate) struct Client {
    pub(crate) inner: RunningService<RoleClient, ()>,
    /// The server process, so a test can see that it has exited.
    pid: u32,
}

impl Client {
    /// The server process's id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// A client over another transport (Streamable HTTP) to the server process `pid`.
    pub(crate) fn over(inner: RunningService<RoleClient, ()>, pid: u32) -> Self {
        Self { inner, pid }
    }

    pub(crate) async fn tools(&self) -> Vec<Tool> {
        self.inner.list_all_tools().await.unwrap()
    }

    pub(crate) async fn tool_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .tools()
            .await
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        names.sort();
        names
    }

    /// Calls a tool; `Err` is the protocol-error channel.
    pub(crate) async fn call(
        &self,
        name: &str,
        args: Value,
    ) -> Result<CallToolResult, rmcp::ServiceError> {
        let Value::Object(map) = args else {
            panic!("arguments must be an object")
        };
        self.inner
            .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(map))
            .await
    }

    /// Calls a tool that must succeed and returns its structured content.
    pub(crate) async fn ok(&self, name: &str, args: Value) -> Value {
        let result = self.call(name, args).await.unwrap();
        assert_ne!(
            result.is_error,
            Some(true),
            "{name} failed: {:?}",
            result.content
        );
        result.structured_content.expect("structured content")
    }

    /// Calls a tool that must fail in-band and returns its stable error code.
    pub(crate) async fn tool_error(&self, name: &str, args: Value) -> String {
        let result = self.call(name, args).await.unwrap();
        assert_eq!(
            result.is_error,
            Some(true),
            "{name} should fail: {:?}",
            result.structured_content
        );
        let meta = result.meta.expect("error meta");
        meta.0["mailgate/errorCode"].as_str().unwrap().to_owned()
    }

    /// Calls a tool that must be refused on the protocol channel (JSON-RPC invalid params, as
    /// for an unknown tool) and returns the error's message.
    pub(crate) async fn protocol_refusal(&self, name: &str, args: Value) -> String {
        match self.call(name, args).await {
            Err(rmcp::ServiceError::McpError(error)) => {
                assert_eq!(
                    error.code,
                    rmcp::model::ErrorCode::INVALID_PARAMS,
                    "{error:?}"
                );
                assert_eq!(error.data, None, "{error:?}");
                error.message.into_owned()
            }
            other => panic!("{name} must be a protocol error: {other:?}"),
        }
    }

    /// The id of the first message `list_messages` answers for `criteria` in `mailbox`.
    pub(crate) async fn first_id(&self, mailbox: &str, criteria: Value) -> String {
        let listing = self
            .ok(
                "list_messages",
                serde_json::json!({"mailbox": mailbox, "criteria": criteria}),
            )
            .await;
        listing["messages"][0]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{mailbox}: no message for the criteria: {listing}"))
            .to_owned()
    }

    pub(crate) async fn close(self) {
        let _ = self.inner.cancel().await;
    }

    /// Closes the session and checks the server has exited: rmcp's close ends stdin and waits
    /// for (reaps) the child, so everything it wrote is on disk once this returns.
    pub(crate) async fn close_and_reap(self) {
        let pid = self.pid;
        self.inner.cancel().await.unwrap();
        assert!(
            !Path::new("/proc").join(pid.to_string()).exists(),
            "the server (pid {pid}) is still running after close"
        );
    }
}

/// The text of all text blocks of a result.
/// The `id` of each message of a search or listing answer, in order.
pub(crate) fn message_ids(answer: &Value) -> Vec<String> {
    answer["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

pub(crate) fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A minimal valid config with one Graph mailbox (no backend is contacted by `policy check`).
pub(crate) const ONE_MAILBOX: &str =
    r#"{ "mailboxes": [ { "alias": "test", "address": "test@example.com" } ] }"#;

/// Sets up the demo (serving on a closed stdin ends at once) and returns its config path.
pub(crate) async fn demo_config(world: &World) -> String {
    let _ = world.run(&["demo", "--serve"]).await;
    let path = world.state().join("demo/plugin.json");
    assert!(path.exists(), "demo setup writes its plugin.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    path.display().to_string()
}

/// The shared read-only demo's own config path (the write and send gates must be closed).
pub(crate) fn shared_demo_config(world: &World) -> String {
    world.assert_read_only();
    shared_demo().config.display().to_string()
}

/// One mailbox of a config written by [`config_over_demo`]: a demo Maildir (by alias), or a
/// Graph mailbox when `maildir` is false.
pub(crate) struct DemoEntry {
    pub(crate) alias: &'static str,
    pub(crate) address: &'static str,
    pub(crate) access: &'static str,
    pub(crate) maildir: bool,
}

/// Sets up the demo and writes a private config over its Maildirs with `mailboxes` and extra
/// top-level keys (e.g. tighter limits); returns its path.
pub(crate) async fn config_over_demo(
    world: &World,
    mailboxes: &[DemoEntry],
    extra: &str,
) -> String {
    demo_config(world).await;
    config_over(world, &world.state().join("demo/mail"), mailboxes, extra)
}

/// As [`config_over_demo`], over the shared read-only demo ([`shared_demo`]): for tests that
/// never write, so the write and send gates must be closed.
pub(crate) fn config_over_shared_demo(
    world: &World,
    mailboxes: &[DemoEntry],
    extra: &str,
) -> String {
    world.assert_read_only();
    config_over(world, &shared_demo().mail, mailboxes, extra)
}

/// The config file `custom.json` in the world's folder: `mailboxes` over the Maildirs under
/// `mail`, plus `extra` top-level keys.
fn config_over(world: &World, mail: &Path, mailboxes: &[DemoEntry], extra: &str) -> String {
    let entries: Vec<String> = mailboxes
        .iter()
        .map(|m| {
            let backend = if m.maildir {
                format!(
                    r#", "backend": {{ "kind": "maildir", "path": "{}" }}"#,
                    mail.join(m.alias).display()
                )
            } else {
                String::new()
            };
            format!(
                r#"{{ "alias": "{}", "address": "{}", "access": "{}"{backend} }}"#,
                m.alias, m.address, m.access
            )
        })
        .collect();
    let json = format!(r#"{{ "mailboxes": [ {} ]{extra} }}"#, entries.join(", "));
    let path = world.path().join("custom.json");
    std::fs::write(&path, json).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path.display().to_string()
}

/// The demo's finance mailbox as a full-access Maildir entry.
pub(crate) const FINANCE: DemoEntry = DemoEntry {
    alias: "finance",
    address: "finance@example.com",
    access: "full",
    maildir: true,
};

/// The demo's personal mailbox as a full-access Maildir entry.
pub(crate) const PERSONAL: DemoEntry = DemoEntry {
    alias: "personal",
    address: "ana.lima@example.com",
    access: "full",
    maildir: true,
};

/// The demo, pointed at its own config, with the handoff gate open.
pub(crate) async fn handoff_world() -> World {
    let world = World::new();
    let cfg = demo_config(&world).await;
    world
        .with("OUTLOOK_PLUGIN_CONFIG", &cfg)
        .with("PLUGIN_ALLOW_LOCAL_HANDOFFS", "true")
}

/// The entry names of `dir`, sorted; empty when it does not exist.
pub(crate) fn sorted_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// finance and personal from the demo, plus a Graph mailbox `cloud` whose endpoints are a closed
/// loopback port ([`GRAPH_TEST_ENV`]): every call on it is `BACKEND_UNAVAILABLE`.
const DEMO_AND_CLOUD: [DemoEntry; 3] = [
    FINANCE,
    PERSONAL,
    DemoEntry {
        alias: "cloud",
        address: "cloud@example.org",
        access: "full",
        maildir: false,
    },
];

/// A config of [`DEMO_AND_CLOUD`] over the shared read-only demo (gates for writing closed).
pub(crate) fn shared_maildir_config(world: &World, extra: &str) -> String {
    config_over_shared_demo(world, &DEMO_AND_CLOUD, extra)
}

/// A uid that is not the test's own (`nobody`): files "planted by another user" are chowned to
/// it.
pub(crate) const OTHER_UID: u32 = 65534;

/// Only root can give a file to another user. CI runs the tests as root, so the tests that need
/// it run there; elsewhere they print why they did nothing and pass.
#[expect(clippy::print_stderr, reason = "a skipped test says why")]
pub(crate) fn running_as_root(test: &str) -> bool {
    let root = rustix::process::geteuid().is_root();
    if !root {
        eprintln!("skipping {test}: it needs root to chown a fixture to uid {OTHER_UID}");
    }
    root
}

/// Gives `path` (not what a symlink points to) to [`OTHER_UID`]. Needs root.
pub(crate) fn give_away(path: &Path) {
    std::os::unix::fs::lchown(path, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
}

/// Creates the directory `path` with exactly `mode` (whatever the umask).
pub(crate) fn mkdir_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Writes `path` with exactly `mode`.
pub(crate) fn write_mode(path: &Path, contents: &[u8], mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, contents).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Makes the Maildir folder `path`: its `cur`, `new` and `tmp` (and any missing parent).
pub(crate) fn make_maildir(path: &Path) {
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(path.join(sub)).unwrap();
    }
}

/// The index tests' mailbox: a Maildir `box` (`box@example.com`) at the world's `mail/box`, with
/// an empty inbox and the empty subfolders `folders`, and a private `plugin.json` listing it
/// alone. Returns the Maildir's root and the config's path.
pub(crate) fn maildir_box(world: &World, folders: &[&str]) -> (PathBuf, String) {
    let mail = world.path().join("mail").join("box");
    make_maildir(&mail);
    for folder in folders {
        make_maildir(&mail.join(format!(".{folder}")));
    }
    let config = world.path().join("plugin.json");
    write_mode(
        &config,
        format!(
            r#"{{ "mailboxes": [ {{ "alias": "box", "address": "box@example.com", "backend": {{ "kind": "maildir", "path": "{}" }} }} ] }}"#,
            mail.display()
        )
        .as_bytes(),
        0o600,
    );
    (mail, config.display().to_string())
}

/// A world whose gates are set explicitly (handoffs, writes, send), as the eight catalogs of
/// catalog.md; with send open, the demo's finance mailbox is the pinned sender.
pub(crate) fn gated_world(handoffs: bool, writes: bool, send: bool) -> World {
    let b = |v: bool| if v { "true" } else { "false" };
    let mut w = World::new()
        .with("PLUGIN_ALLOW_LOCAL_HANDOFFS", b(handoffs))
        .with("PLUGIN_ALLOW_WRITES", b(writes))
        .with("PLUGIN_ALLOW_SEND", b(send));
    if send {
        w = w
            .with("OUTLOOK_SEND_FROM", "finance@example.com")
            .with("OUTLOOK_ALLOWED_SENDERS", "finance@example.com");
    }
    w
}

/// A `mailgate … --http 127.0.0.1:0` server running as a child with a [`World`]'s environment:
/// [`HttpServer::start`] returns once the server has announced its address (read from its stderr
/// within a deadline, never after a fixed sleep), [`HttpServer::stop`] sends SIGTERM and waits for
/// the graceful exit. Dropping it without `stop` kills the server.
pub(crate) struct HttpServer {
    child: tokio::process::Child,
    /// The MCP endpoint the server announced, `http://127.0.0.1:PORT/mcp`.
    pub(crate) url: String,
    /// The bearer token `/mcp` requires; `None` when the server announced no authentication.
    pub(crate) token: Option<String>,
    /// Everything the server wrote to stderr so far (the announcement included).
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    drain: tokio::task::JoinHandle<()>,
}

impl HttpServer {
    /// The bearer token [`HttpServer::start`] gives the server when neither the world nor
    /// `extra_env` sets `OUTLOOK_HTTP_BEARER_TOKEN`, `OUTLOOK_HTTP_ALLOW_NO_AUTH` is not `true` and
    /// no OAuth issuer is set.
    pub(crate) const TOKEN: &str = "test-only-http-bearer-0123456789abcdef";

    /// Starts `mailgate ARGS` with exactly the world's environment plus `extra_env`, in the world's
    /// folder. `args` must serve HTTP on port 0 of a loopback address, e.g.
    /// `["serve", "--http", "127.0.0.1:0", "--config", path]` or `["demo", "--http",
    /// "127.0.0.1:0"]`. Panics with the server's stderr when it exits or stays silent for 60 s
    /// instead of announcing its address.
    pub(crate) async fn start(world: &World, args: &[&str], extra_env: &[(&str, &str)]) -> Self {
        use tokio::io::AsyncBufReadExt as _;
        const TOKEN_VAR: &str = "OUTLOOK_HTTP_BEARER_TOKEN";
        let given = |key: &str| {
            extra_env
                .iter()
                .rev()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| (*v).to_owned())
                .or_else(|| world.env.get(key).cloned())
        };
        let mut cmd = world.command(args);
        let mut token = given(TOKEN_VAR);
        let open = given("OUTLOOK_HTTP_ALLOW_NO_AUTH").as_deref() == Some("true");
        let oauth = given("MAILGATE_HTTP_OAUTH_ISSUER").is_some();
        if token.is_none() && !open && !oauth {
            cmd.env(TOKEN_VAR, Self::TOKEN);
            token = Some(Self::TOKEN.to_owned());
        }
        let mut child = cmd
            .envs(extra_env.iter().copied())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pipe = child.stderr.take().expect("stderr is piped");
        let mut lines = tokio::io::BufReader::new(pipe).lines();
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        let announced = loop {
            let line = match tokio::time::timeout_at(deadline, lines.next_line()).await {
                Ok(Ok(Some(line))) => line,
                Ok(_) => panic!(
                    "mailgate {args:?} ended before serving HTTP:\n{}",
                    stderr.lock().unwrap()
                ),
                Err(_) => panic!(
                    "mailgate {args:?} did not announce its address within 60 s:\n{}",
                    stderr.lock().unwrap()
                ),
            };
            stderr.lock().unwrap().push_str(&format!("{line}\n"));
            if let Some(rest) = line.strip_prefix("mailgate: serving MCP over HTTP at ") {
                break rest.to_owned();
            }
        };
        let url = announced
            .split_once(' ')
            .map_or(announced.as_str(), |(url, _)| url)
            .to_owned();
        if announced.contains("NO authentication") {
            token = None;
        }
        // Keep reading, so the server never blocks on a full pipe.
        let sink = std::sync::Arc::clone(&stderr);
        let drain = tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                sink.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        Self {
            child,
            url,
            token,
            stderr,
            drain,
        }
    }

    /// The address the server listens on (from [`HttpServer::url`]).
    pub(crate) fn addr(&self) -> std::net::SocketAddr {
        self.url
            .strip_prefix("http://")
            .or_else(|| self.url.strip_prefix("https://"))
            .and_then(|rest| rest.split('/').next())
            .and_then(|addr| addr.parse().ok())
            .expect("the announced URL is http(s)://ADDR/mcp")
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id().expect("the server is still running")
    }

    /// What the server has written to stderr so far.
    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends SIGTERM and waits (at most 30 s) for the server to exit; returns its exit status and
    /// everything it wrote to stderr.
    pub(crate) async fn stop(mut self) -> (std::process::ExitStatus, String) {
        let pid = self.child.id().expect("the server is still running");
        let pid = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let wait = std::time::Duration::from_secs(30);
        let Ok(status) = tokio::time::timeout(wait, self.child.wait()).await else {
            panic!(
                "the server did not exit within 30 s of SIGTERM:\n{}",
                self.stderr()
            );
        };
        // The pipe ends with the server (a worker it started could hold it a little longer).
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), &mut self.drain).await;
        (status.unwrap(), self.stderr())
    }
}
