//! Hybrid merging never hides a message (issue 27, item 6), end to end on a Maildir mailbox
//! synced by `mailgate index sync`: two messages that share a Message-ID (a look-alike sent under
//! a real invoice's id) are both listed in the default answer, and an index hit the live side
//! proves gone (deleted after the sync) is never listed, over both stores ([`both_stores!`]).
//! Also the small fixture the other index tests of this issue (`index_vectors`) share.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::stores::{Store, both_stores};
use crate::util::{Client, World, maildir_box, make_maildir};

/// A Maildir mailbox `box` (inbox only) and a config listing it.
pub(crate) struct Mailbox {
    pub(crate) world: World,
    pub(crate) inbox: PathBuf,
    pub(crate) config: String,
    pub(crate) store: Store,
}

impl Mailbox {
    /// On the local store.
    pub(crate) fn new() -> Self {
        let world = World::new();
        let (inbox, config) = maildir_box(&world, &[]);
        Mailbox {
            world,
            inbox,
            config,
            store: Store::Local,
        }
    }

    /// On `store`, its schema created.
    pub(crate) async fn on(store: &Store) -> Self {
        let world = store.world();
        let (inbox, config) = maildir_box(&world, &[]);
        store.migrate(&world, &config).await;
        Mailbox {
            world,
            inbox,
            config,
            store: store.clone(),
        }
    }

    /// Delivers `text` as the message file `name` (in `cur/`).
    pub(crate) fn deliver(&self, name: &str, text: &str) -> PathBuf {
        let path = self.inbox.join("cur").join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Delivers `text` as the message file `name` of the subfolder `folder` (made if missing).
    pub(crate) fn deliver_in(&self, folder: &str, name: &str, text: &str) -> PathBuf {
        let root = self.inbox.join(format!(".{folder}"));
        make_maildir(&root);
        let path = root.join("cur").join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `mailgate index <args>` with `env` added: (success, stdout + stderr).
    pub(crate) async fn index(&self, env: &[(&str, &str)], args: &[&str]) -> (bool, String) {
        let mut all = vec!["--config", self.config.as_str(), "index"];
        all.extend_from_slice(args);
        let out = self.world.run_with(env, &all).await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    }

    /// A server over the config, with `env` added.
    pub(crate) async fn client(&self, env: &[(&str, String)]) -> Client {
        crate::util::spawn_with(
            &self.world,
            &["--config", self.config.as_str(), "serve"],
            env,
        )
        .await
    }

    pub(crate) fn status_json(&self) -> Value {
        let path = self.world.state().join("index/box/status.json");
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    /// The status the last sync left, from whichever store holds the index.
    pub(crate) async fn status(&self) -> Value {
        self.store.status(&self.world, &self.as_indexed()).await
    }

    /// The sizes of the vectors the index holds (the local store's file has one).
    pub(crate) async fn vector_sizes(&self) -> Vec<u32> {
        match &self.store {
            Store::Local => vec![vector_dimension(&vectors_file(self))],
            Store::Shared(_) => self.store.vector_sizes(&self.as_indexed()).await,
        }
    }

    fn as_indexed(&self) -> crate::stores::Mailbox {
        crate::stores::Mailbox::maildir("box", &self.inbox)
    }
}

/// A plain message.
pub(crate) fn mail(from: &str, subject: &str, message_id: &str, minute: u32, body: &str) -> String {
    format!(
        "From: {from}\r\nTo: box@example.com\r\nSubject: {subject}\r\nMessage-ID: <{message_id}>\r\n\
         Date: Mon, 2 Nov 2026 10:{minute:02}:00 +0000\r\n\r\n{body}\r\n"
    )
}

pub(crate) async fn search(client: &Client, tool: &str, criteria: Value) -> Value {
    client
        .ok(tool, json!({ "mailbox": "box", "criteria": criteria }))
        .await
}

fn subjects(answer: &Value) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = answer["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["subject"].as_str().unwrap().to_owned(),
                m["source"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    all.sort();
    all
}

pub(crate) fn warnings(answer: &Value) -> Vec<&str> {
    answer["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect()
}

/// The bystander of the tests here: a lunch note as message `n` (its file name and minute).
fn deliver_lunch(m: &Mailbox, n: u32) {
    m.deliver(
        &format!("17700000{n}.M{n}P1.test:2,"),
        &mail(
            "Ana Lima <ana.lima@example.org>",
            "Lunch",
            "lunch@example.org",
            n,
            "Lunch on Friday?",
        ),
    );
}

both_stores!(issue_27_a_look_alike_under_a_real_message_id_never_hides_the_real_one);
/// See: issue 27 ("Hybrid deduplication trusts a sender-chosen header").
async fn issue_27_a_look_alike_under_a_real_message_id_never_hides_the_real_one(store: Store) {
    let m = Mailbox::on(&store).await;
    m.deliver(
        "177000001.M1P1.test:2,",
        &mail(
            "Billing <billing@example.com>",
            "Invoice 4711",
            "invoice-4711@example.com",
            1,
            "Invoice 4711: please pay to the account ending 1234.",
        ),
    );
    // The look-alike: the same Message-ID, another sender and account.
    m.deliver(
        "177000002.M2P1.test:2,",
        &mail(
            "Billing <billing@example.net>",
            "Invoice 4711 (updated bank details)",
            "invoice-4711@example.com",
            2,
            "Invoice 4711: our bank changed, please pay to the account ending 9999.",
        ),
    );
    deliver_lunch(&m, 3);
    let (ok, out) = m.index(&[], &["sync", "box"]).await;
    assert!(ok, "{out}");
    let client = m.client(&[]).await;
    let expected = vec![
        ("Invoice 4711".to_owned(), "both".to_owned()),
        (
            "Invoice 4711 (updated bank details)".to_owned(),
            "both".to_owned(),
        ),
    ];
    // The default on an indexed alias (hybrid) and hybrid by name.
    for criteria in [
        json!({ "query": "invoice 4711" }),
        json!({ "query": "invoice 4711", "source": "hybrid" }),
    ] {
        let answer = search(&client, "search_mailbox", criteria).await;
        assert_eq!(answer["strategy"], "hybrid", "{answer}");
        assert_eq!(answer["status"], "FOUND", "{answer}");
        assert_eq!(answer["truncated"], false, "{answer}");
        assert_eq!(subjects(&answer), expected, "both listed: {answer}");
    }
    // A listing (no query) lists all three messages, each once.
    let listed = search(&client, "list_messages", json!({ "source": "hybrid" })).await;
    assert_eq!(listed["messages"].as_array().unwrap().len(), 3, "{listed}");
    client.close().await;
}

both_stores!(issue_27_a_hybrid_answer_never_lists_mail_deleted_since_the_sync);
/// See: issue 27 ("a hybrid answer never lists an index hit that its live half proved gone").
async fn issue_27_a_hybrid_answer_never_lists_mail_deleted_since_the_sync(store: Store) {
    let m = Mailbox::on(&store).await;
    let gone = m.deliver(
        "177000001.M1P1.test:2,",
        &mail(
            "Ana Lima <ana.lima@example.org>",
            "Quarterly zephyrword report",
            "report@example.org",
            1,
            "The zephyrword figures.",
        ),
    );
    deliver_lunch(&m, 2);
    let (ok, out) = m.index(&[], &["sync", "box"]).await;
    assert!(ok, "{out}");
    std::fs::remove_file(&gone).unwrap();
    let client = m.client(&[]).await;
    // The index alone still holds it (it answers as of its sync).
    let index = search(
        &client,
        "search_mailbox",
        json!({ "query": "zephyrword", "source": "index" }),
    )
    .await;
    assert_eq!(index["status"], "FOUND", "{index}");
    // Hybrid: the live scan read the whole folder without it and the lookup says it is gone.
    for criteria in [
        json!({ "query": "zephyrword" }),
        json!({ "query": "zephyrword", "source": "hybrid" }),
    ] {
        let answer = search(&client, "search_mailbox", criteria).await;
        assert_eq!(answer["strategy"], "hybrid", "{answer}");
        assert_eq!(answer["messages"], json!([]), "{answer}");
        assert_eq!(
            answer["status"], "NOT_FOUND",
            "the live side proved it: {answer}"
        );
        assert!(warnings(&answer).contains(&"index_hits_gone"), "{answer}");
    }
    // A listing: only the message still there.
    let listed = search(&client, "list_messages", json!({ "source": "hybrid" })).await;
    assert_eq!(
        subjects(&listed),
        vec![("Lunch".to_owned(), "both".to_owned())],
        "{listed}"
    );
    client.close().await;
}

/// The path of the state folder's vectors file of `box`.
pub(crate) fn vectors_file(m: &Mailbox) -> PathBuf {
    m.world.state().join("index/box/vectors/vectors.bin")
}

/// The dimension recorded in a vectors file (after its 8-byte magic).
pub(crate) fn vector_dimension(path: &Path) -> u32 {
    let bytes = std::fs::read(path).unwrap();
    u32::from_le_bytes(bytes[8..12].try_into().unwrap())
}
