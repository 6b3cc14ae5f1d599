//! The index's own state never overclaims (issue 27, items 2, 5, 7): an index is bound to the
//! mailbox it was synced from and to the text analysis that built it, and neither another
//! mailbox's index nor another analysis's is ever served; `index status` says so, `index sync`
//! refuses the first (until `index rebuild`) and rebuilds the second in place, and a running
//! server serves the rebuilt index without a restart. Index files that fail the owner, mode or
//! link checks are never served, and `purge` of a refused index root fails naming the rule
//! instead of answering "no index" (`--force` removes it when it is ours).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::fake_graph::{FakeGraph, Message};
use crate::util::{Client, World, write_mode};

/// Two Maildirs, `first` (alphaword, bravoword) and `second` (charlieword), and a config whose
/// alias `box` names `first` (or, re-pointed, `second`).
struct Fixture {
    world: World,
    mail: PathBuf,
    config: String,
}

fn note(n: usize, word: &str) -> String {
    format!(
        "From: Ana Lima <ana.lima@example.com>\r\nTo: box@example.com\r\nSubject: Note {n} about \
         {word}\r\nMessage-ID: <bind-{n}@example.com>\r\nDate: Mon, 2 Nov 2026 10:0{n}:00 \
         +0000\r\n\r\nThe body of note {n} mentions {word} once.\r\n"
    )
}

impl Fixture {
    fn new() -> Self {
        let world = World::new();
        let mail = world.path().join("mail");
        for (folder, n, word) in [
            ("first", 0, "alphaword"),
            ("first", 1, "bravoword"),
            ("second", 2, "charlieword"),
        ] {
            for sub in ["cur", "new", "tmp"] {
                std::fs::create_dir_all(mail.join(folder).join(sub)).unwrap();
            }
            std::fs::write(
                mail.join(folder)
                    .join("cur")
                    .join(format!("17700000{n}.M{n}P1.test:2,")),
                note(n, word),
            )
            .unwrap();
        }
        let mut f = Fixture {
            world,
            mail,
            config: String::new(),
        };
        f.point_at("first");
        f
    }

    /// Writes the config with `box` naming the Maildir `folder`.
    fn point_at(&mut self, folder: &str) {
        let path = self.world.path().join("plugin.json");
        write_mode(
            &path,
            format!(
                r#"{{"mailboxes": [{{"alias": "box", "address": "box@example.com", "backend": {{"kind": "maildir", "path": "{}"}}}}]}}"#,
                self.mail.join(folder).display()
            )
            .as_bytes(),
            0o600,
        );
        self.config = path.display().to_string();
    }

    async fn index(&self, args: &[&str]) -> (bool, String) {
        let mut all = vec!["--config", self.config.as_str(), "index"];
        all.extend_from_slice(args);
        let out = self.world.run(&all).await;
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    }

    async fn client(&self) -> Client {
        self.world
            .client(&["--config", self.config.as_str(), "serve"])
            .await
    }

    /// What `policy explain` tells the reviewer.
    async fn explain(&self) -> String {
        let out = self
            .world
            .run(&["--config", self.config.as_str(), "policy", "explain"])
            .await;
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn alias_dir(&self) -> PathBuf {
        self.world.state().join("index/box")
    }

    fn edit_status(&self, edit: impl FnOnce(&mut Value)) {
        let path = self.alias_dir().join("status.json");
        let mut status: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        edit(&mut status);
        std::fs::write(&path, serde_json::to_vec(&status).unwrap()).unwrap();
    }
}

async fn search(client: &Client, criteria: Value) -> Value {
    client
        .ok(
            "search_mailbox",
            json!({ "mailbox": "box", "criteria": criteria }),
        )
        .await
}

/// A search of `word` through the index: its answer, or `{"status": "TOOL_ERROR"}` when the
/// tool refused (a mailbox without a served index).
async fn from_index(client: &Client, word: &str) -> Value {
    let result = client
        .call(
            "search_mailbox",
            json!({ "mailbox": "box", "criteria": { "query": word, "source": "index" } }),
        )
        .await
        .unwrap();
    if result.is_error == Some(true) {
        return json!({ "status": "TOOL_ERROR" });
    }
    result.structured_content.expect("structured content")
}

fn warns(answer: &Value, code: &str) -> bool {
    answer["warnings"]
        .as_array()
        .is_some_and(|w| w.contains(&json!(code)))
}

fn subjects(answer: &Value) -> Vec<String> {
    answer["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .map(|m| m["subject"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn an_alias_pointed_at_another_maildir_is_never_served_its_old_index() {
    let mut f = Fixture::new();
    let (ok, out) = f.index(&["sync", "box"]).await;
    assert!(ok && out.contains("box: complete: 2 indexed"), "{out}");
    f.point_at("second");
    let client = f.client().await;

    // The old mailbox's words: never FOUND from its index, never proved absent either.
    let old = search(&client, json!({ "query": "alphaword", "source": "index" })).await;
    assert_eq!(old["status"], "SEARCH_INCOMPLETE", "{old}");
    assert!(warns(&old, "index_mailbox_changed"), "{old}");
    assert!(subjects(&old).is_empty(), "{old}");
    assert!(old.get("indexedThrough").is_none(), "{old}");
    // Listings through the index refuse too, and the default (hybrid) lists only live mail.
    let listed = client
        .ok(
            "list_messages",
            json!({ "mailbox": "box", "criteria": { "source": "index" } }),
        )
        .await;
    assert_eq!(listed["status"], "SEARCH_INCOMPLETE", "{listed}");
    assert!(subjects(&listed).is_empty(), "{listed}");
    let hybrid = client
        .ok("list_messages", json!({ "mailbox": "box", "criteria": {} }))
        .await;
    assert_eq!(subjects(&hybrid), ["Note 2 about charlieword"], "{hybrid}");
    assert!(warns(&hybrid, "index_mailbox_changed"), "{hybrid}");
    assert!(
        hybrid["messages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["source"] == "live"),
        "{hybrid}"
    );
    // An investigation reads no candidate of the old index.
    let investigated = client
        .ok(
            "investigate_documents",
            json!({ "mailbox": "box", "criteria": { "keywords": ["alphaword"], "source": "index" } }),
        )
        .await;
    assert_ne!(investigated["status"], "NOT_FOUND", "{investigated}");
    assert_ne!(investigated["status"], "CONFIRMED", "{investigated}");
    // The resource says it is not served, with no counts of the other mailbox.
    let view = crate::surface::read(&client, "mailgate://box/index")
        .await
        .unwrap();
    assert_eq!(view["provesAbsence"], false, "{view}");
    assert_eq!(view["doubts"], json!(["index_mailbox_changed"]), "{view}");
    assert!(view.get("messages").is_none(), "{view}");
    client.close().await;

    // The operator hears it, and sync refuses until rebuild.
    let (_, status) = f.index(&["status"]).await;
    let line = status.lines().find(|l| l.starts_with("box")).unwrap();
    assert!(line.contains("MAILBOX CHANGED"), "{status}");
    let explain = f.explain().await;
    assert!(
        explain.contains("box [maildir] access=full index=not served (index_mailbox_changed"),
        "{explain}"
    );
    assert!(!line.contains("complete"), "{status}");
    let (ok, out) = f.index(&["sync", "box"]).await;
    assert!(!ok, "{out}");
    assert!(out.contains("mailgate index rebuild box"), "{out}");
    assert!(!out.contains("box: complete"), "{out}");
    let (ok, out) = f.index(&["rebuild", "box"]).await;
    assert!(ok && out.contains("box: complete: 1 indexed"), "{out}");
    let client = f.client().await;
    let now = search(
        &client,
        json!({ "query": "charlieword", "source": "index" }),
    )
    .await;
    assert_eq!(now["status"], "FOUND", "{now}");
    let gone = search(&client, json!({ "query": "alphaword", "source": "index" })).await;
    assert_eq!(gone["status"], "NOT_FOUND", "{gone}");
    client.close().await;
}

#[tokio::test]
async fn a_graph_alias_pointed_at_another_address_is_never_served_its_old_index() {
    const FIRST: &str = "bind.first@example.com";
    const SECOND: &str = "bind.second@example.com";
    let fake = FakeGraph::start().await;
    fake.add_mailbox(FIRST);
    fake.add_mailbox(SECOND);
    fake.add_message(FIRST, "inbox", Message::new("Deltaword note").text("Body."));
    fake.add_message(SECOND, "inbox", Message::new("Echoword note").text("Body."));
    let world = fake
        .env()
        .iter()
        .fold(World::new(), |world, (k, v)| world.with(k, v));
    let config = world.path().join("plugin.json");
    let point_at = |address: &str| {
        write_mode(
            &config,
            format!(r#"{{"mailboxes": [{{"alias": "box", "address": "{address}"}}]}}"#).as_bytes(),
            0o600,
        );
    };
    let config_arg = config.display().to_string();
    point_at(FIRST);
    let sync = world
        .run(&["--config", &config_arg, "index", "sync", "box"])
        .await;
    assert!(sync.status.success(), "{sync:?}");
    point_at(SECOND);
    let client = world.client(&["--config", &config_arg, "serve"]).await;
    let old = search(&client, json!({ "query": "deltaword", "source": "index" })).await;
    assert_eq!(old["status"], "SEARCH_INCOMPLETE", "{old}");
    assert!(warns(&old, "index_mailbox_changed"), "{old}");
    assert!(subjects(&old).is_empty(), "{old}");
    client.close().await;
    let again = world
        .run(&["--config", &config_arg, "index", "sync", "box"])
        .await;
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stdout).contains("mailgate index rebuild box"));
}

#[tokio::test]
async fn an_index_of_another_text_analysis_is_not_served_and_sync_rebuilds_it_in_place() {
    let f = Fixture::new();
    assert!(f.index(&["sync", "box"]).await.0);
    // An index from before analysis versions were recorded.
    f.edit_status(|s| {
        s.as_object_mut().unwrap().remove("analyzer");
    });
    let client = f.client().await;
    let before = search(&client, json!({ "query": "alphaword", "source": "index" })).await;
    assert_eq!(before["status"], "SEARCH_INCOMPLETE", "{before}");
    assert!(warns(&before, "index_rebuild_needed"), "{before}");
    assert!(subjects(&before).is_empty(), "{before}");
    let absent = search(&client, json!({ "query": "zuluword", "source": "index" })).await;
    assert_eq!(absent["status"], "SEARCH_INCOMPLETE", "{absent}");
    let (_, status) = f.index(&["status"]).await;
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("box") && l.contains("REBUILD NEEDED")),
        "{status}"
    );
    // Another version's number: the same.
    f.edit_status(|s| s["analyzer"] = json!(1));
    let (ok, out) = f.index(&["sync", "box"]).await;
    assert!(ok, "{out}");
    assert!(
        out.contains(
            "box: rebuilding the index from scratch: it was built by text analysis version 1"
        ),
        "{out}"
    );
    // Everything indexed again, not incrementally on top of the old tokens.
    assert!(out.contains("box: complete: 2 indexed"), "{out}");
    // The server that was running serves the rebuilt index, without a restart.
    let after = search(&client, json!({ "query": "alphaword", "source": "index" })).await;
    assert_eq!(after["status"], "FOUND", "{after}");
    let absent = search(&client, json!({ "query": "zuluword", "source": "index" })).await;
    assert_eq!(absent["status"], "NOT_FOUND", "{absent}");
    client.close().await;
}

/// Every file under `dir` whose name passes `pick`.
fn files(dir: &Path, pick: &dyn Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(files(&path, pick));
        } else if pick(&e.file_name().to_string_lossy()) {
            out.push(path);
        }
    }
    out
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// An index whose files fail a check is not served: a segment file others may write, a
/// `meta.json` with a second name, a sync state others may read.
#[tokio::test]
async fn index_files_open_to_others_or_hard_linked_are_never_served() {
    let f = Fixture::new();
    assert!(f.index(&["sync", "box"]).await.0);
    let text = f.alias_dir().join("text");
    let served = async || {
        let client = f.client().await;
        let hit = from_index(&client, "alphaword").await;
        client.close().await;
        hit
    };
    let hit = served().await;
    assert_eq!(hit["status"], "FOUND", "{hit}");

    // A segment file anyone may write.
    let segment = files(&text, &|n| n.ends_with(".idx")).remove(0);
    chmod(&segment, 0o666);
    let refused = served().await;
    assert_ne!(refused["status"], "FOUND", "{refused}");
    chmod(&segment, 0o600);
    assert_eq!(served().await["status"], "FOUND");

    // meta.json hard-linked from elsewhere.
    let link = f.world.path().join("meta-link.json");
    std::fs::hard_link(text.join("meta.json"), &link).unwrap();
    let refused = served().await;
    assert_ne!(refused["status"], "FOUND", "{refused}");
    std::fs::remove_file(&link).unwrap();
    assert_eq!(served().await["status"], "FOUND");

    // The sync state open to others: the sync refuses it, naming the rule.
    let state = f.alias_dir().join("sync.redb");
    chmod(&state, 0o644);
    let (ok, out) = f.index(&["sync", "box"]).await;
    assert!(!ok, "{out}");
    assert!(out.contains("group or others"), "{out}");
    assert!(
        !out.contains(&f.world.path().display().to_string()),
        "no path: {out}"
    );
}

/// Owned by another user: refused even as root (root is not exempt).
#[tokio::test]
async fn index_files_of_another_user_are_never_served() {
    if !crate::util::running_as_root("index_files_of_another_user_are_never_served") {
        return;
    }
    let f = Fixture::new();
    assert!(f.index(&["sync", "box"]).await.0);
    let segment = files(&f.alias_dir().join("text"), &|n| n.ends_with(".idx")).remove(0);
    crate::util::give_away(&segment);
    let client = f.client().await;
    let hit = from_index(&client, "alphaword").await;
    assert_ne!(hit["status"], "FOUND", "{hit}");
    client.close().await;
}

/// Whether any file under `dir` contains `needle`.
fn grep_tree(dir: &Path, needle: &[u8]) -> bool {
    files(dir, &|_| true)
        .iter()
        .any(|p| std::fs::read(p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle)))
}

#[tokio::test]
async fn purge_of_a_refused_index_root_fails_naming_the_rule_and_force_removes_it() {
    let f = Fixture::new();
    assert!(f.index(&["sync", "box"]).await.0);
    let root = f.world.state().join("index");
    chmod(&root, 0o755);
    let (ok, out) = f.index(&["purge", "box"]).await;
    assert!(!ok, "{out}");
    assert!(out.contains("permissions are too open"), "{out}");
    assert!(out.contains("--force"), "{out}");
    assert!(!out.contains("no index"), "{out}");
    assert!(grep_tree(&root, b"alphaword"), "nothing was removed");
    // `status` does not pass a refused root off as "not indexed" either.
    let (ok, status) = f.index(&["status"]).await;
    assert!(
        !ok && status.contains("permissions are too open"),
        "{status}"
    );
    // --force removes ours.
    let (ok, out) = f.index(&["purge", "box", "--force"]).await;
    assert!(ok && out.contains("box: purged"), "{out}");
    assert!(!grep_tree(&f.world.state(), b"alphaword"), "mail text left");
}

#[tokio::test]
async fn purge_force_never_removes_another_users_index_folder() {
    if !crate::util::running_as_root("purge_force_never_removes_another_users_index_folder") {
        return;
    }
    let f = Fixture::new();
    assert!(f.index(&["sync", "box"]).await.0);
    crate::util::give_away(&f.alias_dir());
    let (ok, out) = f.index(&["purge", "box", "--force"]).await;
    assert!(!ok, "{out}");
    assert!(out.contains("another user"), "{out}");
    assert!(f.alias_dir().exists());
}
