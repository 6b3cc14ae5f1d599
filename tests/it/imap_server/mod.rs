//! The real mail servers of the IMAP tests: the loopback Dovecot + Postfix of
//! `scripts/mailserver.sh`, found (or, as root, started once per test process) by
//! [`MailServer::get`]; a fresh user per test ([`ImapUser::fresh`]) so parallel tests never meet;
//! a plain-IMAP client over async-imap that seeds, inspects and changes a user's folders
//! independently of mailgate; and the `plugin.json` entries mailgate needs for such a mailbox.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use async_imap::Session;
use async_imap::types::{Fetch, Flag};
use futures::TryStreamExt;
use tokio::net::TcpStream;

use crate::util::{World, write_mode};

/// The one password every test user has (`MT_PASSWORD`).
pub(crate) type ImapSession = Session<TcpStream>;

/// The running test servers, as `scripts/mailserver.sh env` describes them.
#[derive(Debug)]
pub(crate) struct MailServer {
    /// `MT_DIR`: the servers' state folder (config, logs, Maildirs, TLS).
    pub(crate) dir: PathBuf,
    pub(crate) imap_port: u16,
    pub(crate) imaps_port: u16,
    pub(crate) submission_port: u16,
    pub(crate) domain: String,
    pub(crate) password: String,
    /// The test CA that signed the servers' loopback certificate.
    pub(crate) ca: PathBuf,
}

/// Why the IMAP tests cannot run here, or the servers.
type Found = Result<MailServer, String>;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn script(arg: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(repo().join("scripts/mailserver.sh"));
    cmd.arg(arg).stdin(std::process::Stdio::null());
    cmd
}

/// Whether a skip is an error here: in CI (root, servers installable) and when test.sh brought
/// the servers up, the IMAP tests must run.
fn required() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
        || std::env::var("MAILGATE_IMAP_TESTS").is_ok_and(|v| v == "require")
}

fn find() -> Found {
    if let Ok(v) = std::env::var("MAILGATE_IMAP_TESTS")
        && let Some(reason) = v.strip_prefix("skip")
    {
        return Err(format!(
            "MAILGATE_IMAP_TESTS={}",
            if reason.is_empty() { "skip" } else { &v }
        ));
    }
    let running = script("running")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("scripts/mailserver.sh: {e}"))?
        .success();
    if !running {
        if !rustix::process::geteuid().is_root() {
            return Err(
                "not root, and the test mail servers are not running (sudo scripts/mailserver.sh up)"
                    .into(),
            );
        }
        // Dovecot keeps the stderr it starts with: give it a file, never the test's pipes.
        let log_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mailserver-up.log");
        std::fs::create_dir_all(log_path.parent().unwrap()).unwrap();
        let log = std::fs::File::create(&log_path).unwrap();
        let status = script("up")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .status()
            .map_err(|e| format!("scripts/mailserver.sh up: {e}"))?;
        assert!(
            status.success(),
            "scripts/mailserver.sh up failed ({status}):\n{}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        );
    }
    let out = script("env").output().unwrap();
    assert!(out.status.success(), "scripts/mailserver.sh env: {out:?}");
    let vars = parse_env(&String::from_utf8_lossy(&out.stdout));
    let var = |k: &str| {
        vars.get(k)
            .unwrap_or_else(|| panic!("scripts/mailserver.sh env has no {k}: {vars:?}"))
            .clone()
    };
    let port = |k: &str| var(k).parse::<u16>().unwrap();
    Ok(MailServer {
        dir: var("MT_DIR").into(),
        imap_port: port("MT_IMAP_PORT"),
        imaps_port: port("MT_IMAPS_PORT"),
        submission_port: port("MT_SUBMISSION_PORT"),
        domain: var("MT_DOMAIN"),
        password: var("MT_PASSWORD"),
        ca: var("MT_CA_PEM").into(),
    })
}

/// `export A=1 B="x y"` lines into a map.
fn parse_env(text: &str) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("export ") else {
            continue;
        };
        let mut rest = rest.trim();
        while let Some((key, after)) = rest.split_once('=') {
            let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
                let end = quoted.find('"').unwrap_or(quoted.len());
                (&quoted[..end], quoted.get(end + 1..).unwrap_or(""))
            } else {
                after.split_once(' ').unwrap_or((after, ""))
            };
            vars.insert(key.trim().to_owned(), value.to_owned());
            rest = next.trim();
        }
    }
    vars
}

impl MailServer {
    /// The running servers, or `None` after a loud SKIP line when they cannot run here (not
    /// root and not running). Where the IMAP tests are required (CI, or
    /// MAILGATE_IMAP_TESTS=require) a missing server fails the test instead.
    #[expect(clippy::print_stderr, reason = "a skipped test says why, loudly")]
    pub(crate) fn get(test: &str) -> Option<&'static MailServer> {
        static SERVER: OnceLock<Found> = OnceLock::new();
        match SERVER.get_or_init(find) {
            Ok(server) => Some(server),
            Err(reason) if required() => {
                panic!(
                    "{test}: the IMAP tests must run here (CI or MAILGATE_IMAP_TESTS=require), but: {reason}"
                )
            }
            Err(reason) => {
                eprintln!("!!! SKIP {test}: IMAP test not run: {reason}");
                None
            }
        }
    }
}

/// A test user of its own: created by its first login or delivery.
#[derive(Clone, Debug)]
pub(crate) struct ImapUser {
    pub(crate) address: String,
    pub(crate) password: String,
    port: u16,
}

impl ImapUser {
    /// A user no other test (of this or any run) has: `t-<name>-<pid>-<nanos>@<domain>`.
    pub(crate) fn fresh(server: &MailServer, name: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let name: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        Self {
            address: format!("t-{name}-{}-{nanos}@{}", std::process::id(), server.domain),
            password: server.password.clone(),
            port: server.imap_port,
        }
    }

    /// A logged-in plain IMAP session on loopback (the harness's own view of the mailbox).
    pub(crate) async fn session(&self) -> ImapSession {
        let tcp = TcpStream::connect(("127.0.0.1", self.port)).await.unwrap();
        let mut client = async_imap::Client::new(tcp);
        client.read_response().await.unwrap().expect("greeting");
        client
            .login(&self.address, &self.password)
            .await
            .map_err(|(e, _)| e)
            .unwrap()
    }

    /// APPENDs `raw` to `folder` (display name) with `flags` (e.g. `["\\Seen"]`).
    pub(crate) async fn append(&self, folder: &str, raw: &[u8], flags: &[&str]) {
        let mut s = self.session().await;
        append_with(&mut s, folder, raw, flags).await;
        let _ = s.logout().await;
    }

    /// CREATEs `folder` (display name; non-ASCII goes out in modified UTF-7).
    pub(crate) async fn create(&self, folder: &str) {
        let mut s = self.session().await;
        s.create(mutf7_encode(folder)).await.unwrap();
        let _ = s.logout().await;
    }

    /// DELETEs `folder`.
    pub(crate) async fn delete(&self, folder: &str) {
        let mut s = self.session().await;
        s.delete(mutf7_encode(folder)).await.unwrap();
        let _ = s.logout().await;
    }

    /// The folders (display names) with their attributes, e.g. `("Sent", ["\\Sent"])`.
    pub(crate) async fn folders(&self) -> Vec<(String, Vec<String>)> {
        let mut s = self.session().await;
        let names: Vec<_> = s
            .list(Some(""), Some("*"))
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let out = names
            .iter()
            .map(|n| {
                (
                    mutf7_decode(&unescape_quoted(n.name())),
                    n.attributes().iter().map(|a| format!("{a:?}")).collect(),
                )
            })
            .collect();
        let _ = s.logout().await;
        out
    }

    /// The UIDVALIDITY of `folder`.
    pub(crate) async fn uid_validity(&self, folder: &str) -> u32 {
        let mut s = self.session().await;
        let mailbox = s.examine(mutf7_encode(folder)).await.unwrap();
        let _ = s.logout().await;
        mailbox.uid_validity.expect("UIDVALIDITY")
    }

    /// The messages of `folder` as the server holds them (headers and flags), in UID order.
    pub(crate) async fn messages(&self, folder: &str) -> Vec<Stored> {
        let mut s = self.session().await;
        let out = messages_with(&mut s, folder).await;
        let _ = s.logout().await;
        out
    }

    /// Waits (bounded by `within`) until a message of `folder` satisfies `pred`; panics with
    /// what the folder held at the deadline.
    pub(crate) async fn wait_for(
        &self,
        folder: &str,
        within: Duration,
        pred: impl Fn(&Stored) -> bool,
    ) -> Stored {
        let deadline = Instant::now() + within;
        let mut s = self.session().await;
        loop {
            let now = messages_with(&mut s, folder).await;
            if let Some(found) = now.iter().find(|m| pred(m)) {
                let _ = s.logout().await;
                return found.clone();
            }
            assert!(
                Instant::now() < deadline,
                "{}: no matching message in {folder} within {within:?}; it holds {now:#?}",
                self.address
            );
            // Poll: the delivery is another process's work (postfix -> LMTP -> dovecot).
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// APPENDs every message of the demo corpus's `alias` (src/demo/messages/<alias>/<folder>),
    /// with the manifest's flags, into the same-named folders (created when missing); returns
    /// how many.
    pub(crate) async fn seed_demo(&self, alias: &str) -> usize {
        let root = repo().join("src/demo/messages");
        let manifest = std::fs::read_to_string(root.join("manifest.tsv")).unwrap();
        let mut s = self.session().await;
        let existing: Vec<String> = s
            .list(Some(""), Some("*"))
            .await
            .unwrap()
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
            .iter()
            .map(|n| n.name().to_owned())
            .collect();
        let mut count = 0;
        let mut created = existing;
        for line in manifest.lines() {
            let cols: Vec<&str> = line.split('\t').collect();
            let [a, folder, name, flags] = cols[..] else {
                continue;
            };
            if a != alias {
                continue;
            }
            let raw = std::fs::read(root.join(a).join(folder).join(format!("{name}.eml")))
                .unwrap_or_else(|e| panic!("{a}/{folder}/{name}.eml: {e}"));
            // Maildir++ subfolders (`Projects.Alpha`) are `Projects/Alpha` here.
            let folder = folder.replace('.', "/");
            if !created.iter().any(|c| c.eq_ignore_ascii_case(&folder)) {
                s.create(&folder).await.unwrap();
                created.push(folder.clone());
            }
            let flags: Vec<&str> = flags
                .chars()
                .filter_map(|c| match c {
                    'S' => Some("\\Seen"),
                    'R' => Some("\\Answered"),
                    'F' => Some("\\Flagged"),
                    'D' => Some("\\Draft"),
                    _ => None,
                })
                .collect();
            // The arrival date is the message's own Date, as on a real server: SINCE/BEFORE and
            // the listing order see the corpus's dates, not the seeding time.
            let date = mail_parser::MessageParser::default()
                .parse_headers(&raw[..])
                .and_then(|m| m.date().cloned())
                .map(|d| internal_date(d.to_timestamp()));
            let flags = format!("({})", flags.join(" "));
            s.append(
                mutf7_encode(&folder),
                Some(&flags),
                date.as_deref(),
                &raw[..],
            )
            .await
            .unwrap_or_else(|e| panic!("APPEND to {folder}: {e}"));
            count += 1;
        }
        let _ = s.logout().await;
        count
    }
}

/// An IMAP date-time (`"02-Apr-2026 17:05:00 +0000"`) for a Unix time.
fn internal_date(unix: i64) -> String {
    let t = chrono::DateTime::from_timestamp(unix, 0).unwrap_or_default();
    format!("\"{}\"", t.format("%d-%b-%Y %H:%M:%S +0000"))
}

/// APPEND on an open session.
pub(crate) async fn append_with(s: &mut ImapSession, folder: &str, raw: &[u8], flags: &[&str]) {
    let flags = format!("({})", flags.join(" "));
    s.append(mutf7_encode(folder), Some(&flags), None, raw)
        .await
        .unwrap_or_else(|e| panic!("APPEND to {folder}: {e}"));
}

async fn messages_with(s: &mut ImapSession, folder: &str) -> Vec<Stored> {
    let mailbox = s.examine(mutf7_encode(folder)).await.unwrap();
    if mailbox.exists == 0 {
        return Vec::new();
    }
    let fetches: Vec<Fetch> = s
        .uid_fetch("1:*", "(UID FLAGS BODY.PEEK[HEADER])")
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut out: Vec<Stored> = fetches.iter().map(Stored::from_fetch).collect();
    out.sort_by_key(|m| m.uid);
    out
}

/// One message as the server holds it.
#[derive(Clone, Debug)]
pub(crate) struct Stored {
    pub(crate) uid: u32,
    pub(crate) flags: Vec<String>,
    /// The raw header block.
    pub(crate) header: String,
}

impl Stored {
    fn from_fetch(f: &Fetch) -> Self {
        Self {
            uid: f.uid.expect("UID"),
            flags: f
                .flags()
                .map(|flag| match flag {
                    Flag::Seen => "\\Seen".to_owned(),
                    Flag::Answered => "\\Answered".to_owned(),
                    Flag::Flagged => "\\Flagged".to_owned(),
                    Flag::Deleted => "\\Deleted".to_owned(),
                    Flag::Draft => "\\Draft".to_owned(),
                    Flag::Recent => "\\Recent".to_owned(),
                    Flag::MayCreate => "\\*".to_owned(),
                    Flag::Custom(c) => c.to_string(),
                })
                .collect(),
            header: String::from_utf8_lossy(f.header().unwrap_or_default()).into_owned(),
        }
    }

    pub(crate) fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f.eq_ignore_ascii_case(flag))
    }

    /// The (unfolded, decoded) value of the first header `name`.
    pub(crate) fn header_value(&self, name: &str) -> Option<String> {
        let parsed = mail_parser::MessageParser::default().parse_headers(self.header.as_bytes())?;
        parsed
            .header_raw(name)
            .map(|_| ())
            .and_then(|()| match parsed.header(name)? {
                mail_parser::HeaderValue::Text(t) => Some(t.to_string()),
                mail_parser::HeaderValue::Address(a) => Some(
                    a.iter()
                        .filter_map(|addr| addr.address())
                        .collect::<Vec<_>>()
                        .join(", "),
                ),
                _ => parsed.header_raw(name).map(|r| r.trim().to_owned()),
            })
    }

    pub(crate) fn subject(&self) -> String {
        self.header_value("Subject").unwrap_or_default()
    }
}

/// A folder name in IMAP's modified UTF-7 (RFC 3501 §5.1.3): the harness's own encoder, so a
/// bug in mailgate's cannot hide behind a shared one.
pub(crate) fn mutf7_encode(name: &str) -> String {
    use base64::Engine;
    let mut out = String::new();
    let mut pending: Vec<u16> = Vec::new();
    let flush = |pending: &mut Vec<u16>, out: &mut String| {
        if pending.is_empty() {
            return;
        }
        let bytes: Vec<u8> = pending.iter().flat_map(|u| u.to_be_bytes()).collect();
        let b64 = base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes);
        out.push('&');
        out.push_str(&b64.replace('/', ","));
        out.push('-');
        pending.clear();
    };
    for c in name.chars() {
        if (' '..='~').contains(&c) {
            flush(&mut pending, &mut out);
            if c == '&' {
                out.push_str("&-");
            } else {
                out.push(c);
            }
        } else {
            let mut buf = [0u16; 2];
            pending.extend_from_slice(c.encode_utf16(&mut buf));
        }
    }
    flush(&mut pending, &mut out);
    out
}

/// A LIST name as the server quoted it, unescaped: imap-proto hands quoted strings over with
/// their `\"` and `\\` escapes still in place.
pub(crate) fn unescape_quoted(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    out
}

/// The display form of a modified UTF-7 folder name.
pub(crate) fn mutf7_decode(wire: &str) -> String {
    use base64::Engine;
    let mut out = String::new();
    let mut rest = wire;
    while let Some(start) = rest.find('&') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let end = after.find('-').unwrap_or(after.len());
        let chunk = &after[..end];
        if chunk.is_empty() {
            out.push('&');
        } else {
            let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(chunk.replace(',', "/"))
                .unwrap_or_default();
            let units: Vec<u16> = bytes
                .chunks(2)
                .filter(|c| c.len() == 2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            out.push_str(&String::from_utf16_lossy(&units));
        }
        rest = after.get(end + 1..).unwrap_or("");
    }
    out.push_str(rest);
    out
}

/// How mailgate reaches the IMAP server of a mailbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Security {
    /// Implicit TLS on the IMAPS port.
    Tls,
    /// STARTTLS on the IMAP port.
    StartTls,
    /// Plain IMAP on the IMAP port (loopback only).
    Plain,
}

/// One IMAP mailbox entry of a `plugin.json`.
#[derive(Clone, Debug)]
pub(crate) struct ImapEntry {
    pub(crate) alias: String,
    pub(crate) address: String,
    pub(crate) password: String,
    pub(crate) host: String,
    pub(crate) imap_port: u16,
    pub(crate) security: Security,
    pub(crate) smtp_port: u16,
    pub(crate) ca: Option<PathBuf>,
    pub(crate) imap_per_minute: Option<u32>,
    pub(crate) access: Option<&'static str>,
}

impl ImapEntry {
    /// `user`'s mailbox as `alias`: IMAPS with the test CA, SMTP submission with STARTTLS, a
    /// bucket of 6000 IMAP commands a minute (the largest accepted).
    pub(crate) fn new(server: &MailServer, alias: &str, user: &ImapUser) -> Self {
        Self {
            alias: alias.to_owned(),
            address: user.address.clone(),
            password: user.password.clone(),
            host: "127.0.0.1".into(),
            imap_port: server.imaps_port,
            security: Security::Tls,
            smtp_port: server.submission_port,
            ca: Some(server.ca.clone()),
            // The tests make hundreds of calls a minute; the default 60/minute bucket would
            // refuse them. The rate-limit test sets its own small bucket.
            imap_per_minute: Some(6000),
            access: None,
        }
    }

    /// IMAP on `port` with `security` (e.g. a proxy's port, or STARTTLS on the IMAP port).
    pub(crate) fn imap(mut self, security: Security, port: u16) -> Self {
        self.security = security;
        self.imap_port = port;
        self
    }

    pub(crate) fn host(mut self, host: &str) -> Self {
        self.host = host.to_owned();
        self
    }

    pub(crate) fn ca(mut self, ca: Option<PathBuf>) -> Self {
        self.ca = ca;
        self
    }

    pub(crate) fn imap_per_minute(mut self, n: u32) -> Self {
        self.imap_per_minute = Some(n);
        self
    }

    /// The variable that holds this mailbox's password: `<ALIAS>_IMAP_PASSWORD`.
    pub(crate) fn password_env(&self) -> String {
        format!(
            "{}_IMAP_PASSWORD",
            self.alias.to_ascii_uppercase().replace('-', "_")
        )
    }

    /// The entry as JSON, in the form the config parser accepts.
    pub(crate) fn json(&self) -> serde_json::Value {
        let security = match self.security {
            Security::Tls => "tls",
            Security::StartTls => "starttls",
            Security::Plain => "plain",
        };
        let mut imap = serde_json::json!({
            "host": self.host, "port": self.imap_port, "security": security,
            "passwordEnv": self.password_env(),
        });
        let mut smtp = serde_json::json!({
            "host": self.host, "port": self.smtp_port, "security": "starttls",
            "passwordEnv": self.password_env(),
        });
        if let Some(ca) = &self.ca {
            imap["caFile"] = ca.display().to_string().into();
            smtp["caFile"] = ca.display().to_string().into();
        }
        if let Some(n) = self.imap_per_minute {
            imap["rateLimit"] = serde_json::json!({ "imapPerMinute": n });
        }
        let mut entry = serde_json::json!({
            "alias": self.alias, "address": self.address,
            "backend": {"kind": "imap", "imap": imap, "smtp": smtp},
        });
        if let Some(access) = self.access {
            entry["access"] = access.into();
        }
        entry
    }
}

/// Writes `plugin.json` (0600) in the world's folder with `entries` (IMAP entries and any other
/// JSON entries) and gives the world each IMAP entry's password variable; returns the world and
/// the config path. The servers' CA is copied into the world (0600, the test user's own), since
/// mailgate trusts a caFile only under the checks plugin.json passes, and the servers' own copy
/// may be root's.
pub(crate) fn imap_config(
    server: &MailServer,
    mut world: World,
    entries: &[ImapEntry],
    others: &[serde_json::Value],
) -> (World, String) {
    let ca = world.path().join("ca.pem");
    write_mode(&ca, &std::fs::read(&server.ca).unwrap(), 0o600);
    let mut all: Vec<serde_json::Value> = entries
        .iter()
        .map(|e| {
            let mut e = e.clone();
            if e.ca.as_deref() == Some(server.ca.as_path()) {
                e.ca = Some(ca.clone());
            }
            e.json()
        })
        .collect();
    all.extend(others.iter().cloned());
    for e in entries {
        world = world.with(&e.password_env(), &e.password);
    }
    let path = world.path().join("plugin.json");
    write_mode(
        &path,
        // Listings of a whole seeded folder compare against the server: no 20-message default.
        serde_json::json!({ "mailboxes": all, "maxResultsPerMailbox": 100 })
            .to_string()
            .as_bytes(),
        0o600,
    );
    let path = path.display().to_string();
    (world, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modified_utf7_round_trips_and_matches_rfc3501() {
        // RFC 3501 §5.1.3's example.
        assert_eq!(
            mutf7_encode("~peter/mail/台北/日本語"),
            "~peter/mail/&U,BTFw-/&ZeVnLIqe-"
        );
        assert_eq!(mutf7_encode("a&b"), "a&-b");
        for name in ["Relatórios \"Q1\"", "x\\y", "Ümlaut & Co", "📎 files"] {
            assert_eq!(mutf7_decode(&mutf7_encode(name)), name);
        }
    }

    #[test]
    fn the_env_lines_parse() {
        let vars = parse_env("export A=1 B=two\nexport C=\"x y\" D=4\n");
        assert_eq!(vars["A"], "1");
        assert_eq!(vars["B"], "two");
        assert_eq!(vars["C"], "x y");
        assert_eq!(vars["D"], "4");
    }
}
