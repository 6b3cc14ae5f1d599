//! Issue 36, "no false absence on real mail": the MIME-shape corpus of
//! `tests/fixtures/mime-shapes` (written by `scripts/gen-mime-shapes.py`, described by its
//! `shapes.json`) held to one answer per shape on every path that reads mail. Each shape is the
//! only message of a folder of its own, so a search scoped to that folder answers for that shape
//! alone:
//!
//! * `get_message` shows the shape's present word in its body (as text, not inside an
//!   attachment), and lists exactly the attachments the manifest names (when it names any);
//! * `search_mailbox` for the present word is `FOUND`, and for the absent word it is the
//!   manifest's status (`NOT_FOUND`, or `SEARCH_INCOMPLETE` with the warning naming the part
//!   no matcher could read);
//! * a word only inside a nested message is found by `investigate_documents`.
//!
//! The paths: the live Maildir scan, the index after `mailgate index sync` over both stores
//! ([`both_stores!`]), and IMAP against the test Dovecot (skipped, loudly, as the other IMAP
//! tests are, where it cannot run). Each test collects every disagreement into one table
//! (shape × path × check → expected / got) and fails with the whole table, so one run shows
//! them all.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::imap_server::{ImapEntry, ImapUser, MailServer, append_with, imap_config};
use crate::stores::{Store, both_stores};
use crate::util::{Client, World, make_maildir, write_mode};

/// One entry of `shapes.json` (see the generator's doc for each field).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Shape {
    file: String,
    shape: String,
    subject: String,
    present: String,
    body_contains: Vec<String>,
    absent: String,
    absent_status: String,
    absent_warning: Option<String>,
    attachments: Option<Vec<String>>,
    nested_word: Option<String>,
}

#[derive(Deserialize)]
struct Manifest {
    shapes: Vec<Shape>,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mime-shapes")
}

/// The manifest's shapes; every file it names exists and every .eml is named.
fn shapes() -> Vec<Shape> {
    let text = std::fs::read_to_string(corpus_dir().join("shapes.json")).unwrap();
    let manifest: Manifest = serde_json::from_str(&text).unwrap();
    let mut named: Vec<&str> = manifest.shapes.iter().map(|s| s.file.as_str()).collect();
    named.sort_unstable();
    let on_disk: Vec<String> = crate::util::sorted_names(&corpus_dir())
        .into_iter()
        .filter(|n| n.ends_with(".eml"))
        .collect();
    assert_eq!(named, on_disk, "shapes.json names exactly the .eml files");
    assert!(manifest.shapes.len() >= 20, "the corpus lost shapes");
    manifest.shapes
}

impl Shape {
    /// `NN` of `NN-name.eml`.
    fn number(&self) -> &str {
        &self.file[..2]
    }

    /// The folder the shape is the only message of (the same name on Maildir and IMAP).
    fn folder(&self) -> String {
        format!("Shape{}", self.number())
    }

    fn raw(&self) -> Vec<u8> {
        std::fs::read(corpus_dir().join(&self.file)).unwrap()
    }

    fn label(&self) -> &str {
        self.file.trim_end_matches(".eml")
    }
}

/// One check of one shape on one path.
struct Row {
    shape: String,
    path: String,
    check: String,
    expected: String,
    got: String,
}

/// Every check a test made; [`Table::finish`] fails with all the disagreements at once.
#[derive(Default)]
struct Table {
    checked: usize,
    failed: Vec<Row>,
}

impl Table {
    fn record(
        &mut self,
        shape: &Shape,
        path: &str,
        check: &str,
        ok: bool,
        expected: &str,
        got: &str,
    ) {
        self.checked += 1;
        if !ok {
            self.failed.push(Row {
                shape: shape.label().to_owned(),
                path: path.to_owned(),
                check: check.to_owned(),
                expected: expected.to_owned(),
                got: got.to_owned(),
            });
        }
    }

    /// Fails with the table of every disagreement (the shape's description below each row
    /// group), or returns when there is none.
    fn finish(self, what: &str, shapes: &[Shape]) {
        if self.failed.is_empty() {
            return;
        }
        let width = |f: fn(&Row) -> &str, title: &str| {
            self.failed
                .iter()
                .map(|r| f(r).chars().count())
                .chain([title.len()])
                .max()
                .unwrap_or(0)
        };
        let (ws, wp, wc, we) = (
            width(|r| &r.shape, "shape"),
            width(|r| &r.path, "path"),
            width(|r| &r.check, "check"),
            width(|r| &r.expected, "expected"),
        );
        let mut out = format!(
            "{what}: {} of {} checks disagree\n{:ws$} | {:wp$} | {:wc$} | {:we$} | got\n",
            self.failed.len(),
            self.checked,
            "shape",
            "path",
            "check",
            "expected",
        );
        for r in &self.failed {
            out.push_str(&format!(
                "{:ws$} | {:wp$} | {:wc$} | {:we$} | {}\n",
                r.shape, r.path, r.check, r.expected, r.got
            ));
        }
        out.push_str("\nshapes that disagree:\n");
        let mut seen = std::collections::BTreeSet::new();
        for r in &self.failed {
            if seen.insert(r.shape.clone())
                && let Some(s) = shapes.iter().find(|s| s.label() == r.shape)
            {
                out.push_str(&format!("  {}: {}\n", r.shape, s.shape));
            }
        }
        panic!("{out}");
    }
}

/// A tool call's structured answer, or why there is none (a tool error is a table row, not a
/// panic: the other shapes still get checked). `long_bodies` calls through it too.
pub(crate) async fn call(client: &Client, tool: &str, args: Value) -> Result<Value, String> {
    match client.call(tool, args).await {
        Ok(result) if result.is_error == Some(true) => Err(format!(
            "tool error {}",
            result
                .meta
                .as_ref()
                .and_then(|m| m.0.get("mailgate/errorCode"))
                .map_or_else(|| format!("{:?}", result.content), Value::to_string)
        )),
        Ok(result) => result
            .structured_content
            .ok_or_else(|| "no structured content".to_owned()),
        Err(e) => Err(format!("protocol error: {e}")),
    }
}

fn warnings(answer: &Value) -> Vec<String> {
    answer["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .map(|w| w.as_str().map_or_else(|| w.to_string(), str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `STATUS [warnings] n=messages` of a search answer.
fn describe(answer: &Result<Value, String>) -> String {
    match answer {
        Ok(a) => format!(
            "{} [{}] n={}",
            a["status"].as_str().unwrap_or("?"),
            warnings(a).join(","),
            a["messages"].as_array().map_or(0, Vec::len)
        ),
        Err(e) => e.clone(),
    }
}

/// Where each shape lives in one mailbox: its folder's id there.
type Folders = BTreeMap<String, String>;

/// `search_mailbox` for the present and the absent word of every shape, in its folder, from
/// `source`.
async fn search_checks(
    table: &mut Table,
    client: &Client,
    mailbox: &str,
    path: &str,
    source: &str,
    folders: &Folders,
    shapes: &[Shape],
) {
    for s in shapes {
        let Some(folder) = folders.get(&s.file) else {
            table.record(s, path, "folder", false, "the shape's folder", "missing");
            continue;
        };
        let search = |query: &str| {
            json!({"mailbox": mailbox, "criteria": {
                "query": query, "folder": folder, "source": source, "maxResults": 10
            }})
        };
        let present = call(client, "search_mailbox", search(&s.present)).await;
        let ok = present.as_ref().is_ok_and(|a| {
            a["status"] == "FOUND" && a["messages"].as_array().is_some_and(|m| m.len() == 1)
        });
        let check = format!("search {}", s.present);
        table.record(s, path, &check, ok, "FOUND n=1", &describe(&present));

        let absent = call(client, "search_mailbox", search(&s.absent)).await;
        let ok = absent.as_ref().is_ok_and(|a| {
            a["status"] == s.absent_status.as_str()
                && s.absent_warning
                    .as_ref()
                    .is_none_or(|w| warnings(a).contains(w))
        });
        let expected = match &s.absent_warning {
            Some(w) => format!("{} [{w}]", s.absent_status),
            None => s.absent_status.clone(),
        };
        let check = format!("search {}", s.absent);
        table.record(s, path, &check, ok, &expected, &describe(&absent));
    }
}

/// `get_message` of every shape: the body holds the manifest's strings, and the attachments
/// are the manifest's content types (where it names them).
async fn message_checks(
    table: &mut Table,
    client: &Client,
    mailbox: &str,
    path: &str,
    folders: &Folders,
    shapes: &[Shape],
) {
    for s in shapes {
        let Some(folder) = folders.get(&s.file) else {
            continue;
        };
        let listing = call(
            client,
            "list_messages",
            json!({"mailbox": mailbox, "criteria": {"folder": folder, "maxResults": 5}}),
        )
        .await;
        let id = listing
            .as_ref()
            .ok()
            .and_then(|l| l["messages"][0]["id"].as_str().map(str::to_owned));
        let Some(id) = id else {
            table.record(
                s,
                path,
                "list_messages",
                false,
                "one message",
                &describe(&listing),
            );
            continue;
        };
        let message = call(
            client,
            "get_message",
            json!({"mailbox": mailbox, "messageId": id}),
        )
        .await;
        let message = match message {
            Ok(m) => m["message"].clone(),
            Err(e) => {
                table.record(s, path, "get_message", false, "an answer", &e);
                continue;
            }
        };
        let body = message["body"].as_str().unwrap_or_default();
        for want in &s.body_contains {
            let shown: String = body.chars().take(160).collect();
            table.record(
                s,
                path,
                &format!("body has {want}"),
                body.contains(want.as_str()),
                "contains it",
                &format!("{shown:?}"),
            );
        }
        if let Some(expected) = &s.attachments {
            let got: Vec<String> = message["attachments"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|a| a["contentType"].as_str().unwrap_or("?").to_owned())
                        .collect()
                })
                .unwrap_or_default();
            table.record(
                s,
                path,
                "attachments",
                &got == expected,
                &format!("{expected:?}"),
                &format!("{got:?}"),
            );
        }
    }
}

/// `investigate_documents` for each nested word, over `mailbox`'s inbox (which holds the
/// shapes with a nested message): the shape's message matches on an attachment's content.
async fn nested_checks(
    table: &mut Table,
    client: &Client,
    mailbox: &str,
    path: &str,
    shapes: &[Shape],
) {
    for s in shapes {
        let Some(word) = &s.nested_word else {
            continue;
        };
        let out = call(
            client,
            "investigate_documents",
            json!({"mailbox": mailbox, "criteria": {"keywords": [word], "folders": ["inbox"]}}),
        )
        .await;
        let matched = out.as_ref().is_ok_and(|o| {
            o["matches"].as_array().is_some_and(|ms| {
                ms.iter().any(|m| {
                    m["message"]["subject"] == s.subject.as_str()
                        && m["contentMatchAttachmentIds"]
                            .as_array()
                            .is_some_and(|ids| !ids.is_empty())
                })
            })
        });
        let got = match &out {
            Ok(o) => format!(
                "{} matches={}",
                o["status"].as_str().unwrap_or("?"),
                o["matches"]
                    .as_array()
                    .map(|ms| {
                        ms.iter()
                            .map(|m| m["message"]["subject"].to_string())
                            .collect::<Vec<_>>()
                            .join(";")
                    })
                    .unwrap_or_default()
            ),
            Err(e) => e.clone(),
        };
        table.record(
            s,
            path,
            &format!("investigate {word}"),
            matched,
            "the message, on an attachment's content",
            &got,
        );
    }
}

/// The Maildir world: mailbox `shapes` (an empty inbox and one folder per shape) and mailbox
/// `nested` (an inbox holding the shapes with nested messages), and a config listing both.
struct Fixture {
    config: String,
    shapes_root: PathBuf,
}

fn maildir_fixture(world: &World, shapes: &[Shape]) -> Fixture {
    let mail = world.path().join("mail");
    let root = mail.join("shapes");
    make_maildir(&root);
    let nested = mail.join("nested");
    make_maildir(&nested);
    for (i, s) in shapes.iter().enumerate() {
        let folder = root.join(format!(".{}", s.folder()));
        make_maildir(&folder);
        let name = format!("{}.M{i}P1.shapes:2,S", 1_770_000_000 + i);
        std::fs::write(folder.join("cur").join(&name), s.raw()).unwrap();
        if s.nested_word.is_some() {
            std::fs::write(nested.join("cur").join(&name), s.raw()).unwrap();
        }
    }
    let entry = |alias: &str, path: &Path| {
        json!({"alias": alias, "address": format!("{alias}@example.com"),
               "backend": {"kind": "maildir", "path": path.display().to_string()}})
    };
    let config = world.path().join("plugin.json");
    write_mode(
        &config,
        json!({"mailboxes": [entry("shapes", &root), entry("nested", &nested)]})
            .to_string()
            .as_bytes(),
        0o600,
    );
    Fixture {
        config: config.display().to_string(),
        shapes_root: root,
    }
}

/// On Maildir a folder's id is its name.
fn maildir_folders(shapes: &[Shape]) -> Folders {
    shapes
        .iter()
        .map(|s| (s.file.clone(), s.folder()))
        .collect()
}

/// `shapes.json`, which the real MCP clients of `tests/it/real_clients.rs` read their
/// expectations from.
pub(crate) fn manifest_path() -> PathBuf {
    corpus_dir().join("shapes.json")
}

/// The live-Maildir world of the test below for a client outside the harness
/// (`tests/it/real_clients.rs`): writes mailbox `shapes` (one folder `ShapeNN` per shape of the
/// manifest, checked against the .eml files) and `nested` into `world`, and returns the path of
/// the plugin.json listing both.
pub(crate) fn shapes_maildir_config(world: &World) -> String {
    maildir_fixture(world, &shapes()).config
}

#[tokio::test]
async fn issue_36_every_shape_reads_and_searches_alike_on_the_live_maildir() {
    let shapes = shapes();
    let world = World::new();
    let fixture = maildir_fixture(&world, &shapes);
    let client = world.client(&["--config", &fixture.config, "serve"]).await;
    let folders = maildir_folders(&shapes);
    let mut table = Table::default();
    let path = "maildir-live";
    message_checks(&mut table, &client, "shapes", path, &folders, &shapes).await;
    search_checks(
        &mut table, &client, "shapes", path, "live", &folders, &shapes,
    )
    .await;
    nested_checks(&mut table, &client, "nested", path, &shapes).await;
    client.close().await;
    table.finish("live Maildir", &shapes);
}

both_stores!(issue_36_every_shape_searches_alike_from_the_index);
/// The index `mailgate index sync` built of the shapes answers as the live scan must: the
/// present word found, the absent word the manifest's status.
async fn issue_36_every_shape_searches_alike_from_the_index(store: Store) {
    let shapes = shapes();
    let world = store.world();
    let fixture = maildir_fixture(&world, &shapes);
    assert!(fixture.shapes_root.join(".Shape01/cur").exists());
    store.migrate(&world, &fixture.config).await;
    let out = world
        .run(&["--config", &fixture.config, "index", "sync", "shapes"])
        .await;
    assert!(
        out.status.success(),
        "index sync: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let client = world.client(&["--config", &fixture.config, "serve"]).await;
    let path = if store.is_shared() {
        "index-postgres"
    } else {
        "index-local"
    };
    let mut table = Table::default();
    let folders = maildir_folders(&shapes);
    search_checks(
        &mut table, &client, "shapes", path, "index", &folders, &shapes,
    )
    .await;
    client.close().await;
    table.finish(&format!("index ({path})"), &shapes);
}

#[tokio::test]
async fn issue_36_every_shape_reads_and_searches_alike_over_imap() {
    let test = "issue_36_every_shape_reads_and_searches_alike_over_imap";
    let Some(server) = MailServer::get(test) else {
        return;
    };
    let shapes = shapes();
    let user = ImapUser::fresh(server, "mime-shapes");
    let nested = ImapUser::fresh(server, "mime-shapes-nested");
    let mut session = user.session().await;
    for s in &shapes {
        session.create(s.folder()).await.unwrap();
        append_with(&mut session, &s.folder(), &s.raw(), &["\\Seen"]).await;
    }
    let _ = session.logout().await;
    let mut session = nested.session().await;
    for s in shapes.iter().filter(|s| s.nested_word.is_some()) {
        append_with(&mut session, "INBOX", &s.raw(), &["\\Seen"]).await;
    }
    let _ = session.logout().await;

    let (world, config) = imap_config(
        server,
        World::new(),
        &[
            ImapEntry::new(server, "shapes", &user),
            ImapEntry::new(server, "nested", &nested),
        ],
        &[],
    );
    let client = world.client(&["--config", &config, "serve"]).await;
    let listing = client
        .ok("list_folders", json!({"mailbox": "shapes"}))
        .await;
    let by_name: BTreeMap<String, String> = listing["folders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["displayName"].as_str().unwrap().to_owned(),
                f["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let folders: Folders = shapes
        .iter()
        .filter_map(|s| {
            by_name
                .get(&s.folder())
                .map(|id| (s.file.clone(), id.clone()))
        })
        .collect();
    let mut table = Table::default();
    let path = "imap-live";
    message_checks(&mut table, &client, "shapes", path, &folders, &shapes).await;
    search_checks(
        &mut table, &client, "shapes", path, "live", &folders, &shapes,
    )
    .await;
    nested_checks(&mut table, &client, "nested", path, &shapes).await;
    client.close().await;
    table.finish("IMAP (Dovecot)", &shapes);
}
