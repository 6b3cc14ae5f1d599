//! Local attachment handoffs over the real binary (security.md §4): the gate, the end-to-end
//! create/get/replay flow and its refusals, tampered bundles, crashes at each step of a create,
//! quotas (sequential and across concurrent processes) and drafts that attach a handoff.
//!
//! Bundles are inspected and tampered with on disk under `<state>/handoffs`; everything the tools
//! answer is checked to carry no path, payload bytes, fingerprint or key digest.

use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use base64::Engine as _;
use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::util::{
    Client, EXE, FINANCE, PERSONAL, World, config_over_demo, demo_config, handoff_world,
    sorted_names, text_of,
};

const HANDOFF_TOOLS: [&str; 2] = ["create_attachment_handoff", "get_attachment_handoff"];
/// Well-formed, never issued.
const UNKNOWN_ID: &str = "oh_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
/// The demo PDF (`att-0` of the first finance message with an attachment).
const PDF_SIZE: u64 = 1034;

/// A distinct, valid UUIDv4 idempotency key per `n`.
fn key(n: u32) -> String {
    format!("{n:08x}-1c2d-4e3f-8a4b-5c6d7e8f9a0b")
}

/// finance, personal and the read-narrowed archive over the demo Maildirs, with extra top-level
/// keys (limits), and the handoff gate open.
async fn limited_world(extra: &str) -> World {
    let world = World::new();
    let mailboxes = [FINANCE, PERSONAL];
    let cfg = config_over_demo(&world, &mailboxes, extra).await;
    world
        .with("OUTLOOK_PLUGIN_CONFIG", &cfg)
        .with("PLUGIN_ALLOW_LOCAL_HANDOFFS", "true")
}

fn root(world: &World) -> PathBuf {
    world.state().join("handoffs")
}

/// Every bundle directory in the root (committed or not).
fn bundles(world: &World) -> Vec<String> {
    sorted_names(&root(world))
        .into_iter()
        .filter(|n| n != ".lock" && n != ".key")
        .collect()
}

/// The bundles holding a `manifest.json`.
fn committed(world: &World) -> Vec<String> {
    bundles(world)
        .into_iter()
        .filter(|n| root(world).join(n).join("manifest.json").exists())
        .collect()
}

fn bundle(world: &World, id: &str) -> PathBuf {
    root(world).join(id)
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The binary with the world's environment (like `World::run`, but open to extra variables and
/// to being spawned without waiting).
fn command(world: &World, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(EXE);
    cmd.args(args)
        .env_clear()
        .envs(&world.env)
        .current_dir(world.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn create_args(mailbox: &str, message: &str, attachment: &str, key: &str) -> Value {
    json!({"mailbox": mailbox, "messageId": message, "attachmentId": attachment,
           "idempotencyKey": key})
}

/// What one `mailgate call` printed: exit code and the JSON on stdout.
fn parse_call(out: &Output) -> (Option<i32>, Value) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value = serde_json::from_str(&stdout).unwrap_or_else(|_| {
        panic!(
            "not JSON (status {:?}): {stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), value)
}

async fn call(world: &World, tool: &str, args: &Value) -> (Option<i32>, Value) {
    let json = args.to_string();
    parse_call(&world.run(&["call", tool, &json]).await)
}

/// A CLI call that must succeed; returns its structured content.
async fn call_ok(world: &World, tool: &str, args: &Value) -> Value {
    let (code, v) = call(world, tool, args).await;
    assert_eq!(code, Some(0), "{tool} {args}: {v}");
    v
}

/// A CLI call that must fail in-band; returns the error code.
async fn call_err(world: &World, tool: &str, args: &Value) -> String {
    let (code, v) = call(world, tool, args).await;
    assert_eq!(code, Some(1), "{tool} {args} should fail: {v}");
    v["error"]["code"].as_str().unwrap().to_owned()
}

/// The finance messages with one attachment each: (the 1034-byte PDF, a CSV, a JSON file).
async fn finance_messages(world: &World) -> (String, String, String) {
    let listing = call_ok(
        world,
        "list_messages",
        &json!({"mailbox": "finance",
                "criteria": {"hasAttachments": true, "maxResults": 20,
                             "includeAttachmentNames": true}}),
    )
    .await;
    let find = |content_type: &str| {
        listing["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["attachments"][0]["contentType"] == content_type)
            .unwrap_or_else(|| panic!("a finance message with a {content_type}: {listing}"))
            .clone()
    };
    let pdf = find("application/pdf");
    assert_eq!(pdf["attachments"][0]["id"], "att-0");
    assert_eq!(pdf["attachments"][0]["size"], PDF_SIZE);
    let id = |m: Value| m["id"].as_str().unwrap().to_owned();
    (id(pdf), id(find("text/csv")), id(find("application/json")))
}

/// The in-band error code and `_meta["mailgate/reason"]` of a failed call.
fn error_of(result: &CallToolResult) -> (String, Option<String>) {
    assert_eq!(
        result.is_error,
        Some(true),
        "should fail: {:?}",
        result.structured_content
    );
    let meta = &result.meta.as_ref().expect("error meta").0;
    (
        meta["mailgate/errorCode"].as_str().unwrap().to_owned(),
        meta.get("mailgate/reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
    )
}

/// The fields of a handoff result that describe the bundle (not the framing, not `replayed`).
fn projection(v: &Value) -> Value {
    json!({
        "handoffId": v["handoffId"], "filename": v["filename"], "contentType": v["contentType"],
        "size": v["size"], "sha256": v["sha256"], "createdAt": v["createdAt"],
        "status": v["status"],
    })
}

/// Strings that must never appear in anything a handoff tool answers.
fn secrets(world: &World, id: &str) -> Vec<String> {
    let dir = bundle(world, id);
    let payload = std::fs::read(dir.join("payload.bin")).unwrap();
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&payload);
    let b64_url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&payload);
    vec![
        "payload.bin".into(),
        "manifest.json".into(),
        world.state().display().to_string(),
        root(world).display().to_string(),
        "requestFingerprint".into(),
        "keyDigest".into(),
        manifest["requestFingerprint"].as_str().unwrap().to_owned(),
        manifest["keyDigest"].as_str().unwrap().to_owned(),
        b64[..40].to_owned(),
        b64_url[..40].to_owned(),
    ]
}

fn assert_clean(answer: &str, secrets: &[String]) {
    for s in secrets {
        assert!(!answer.contains(s.as_str()), "{s:?} leaked in {answer}");
    }
}

#[tokio::test]
async fn handoff_tools_exist_only_behind_their_gate() {
    let world = World::new();
    let cfg = demo_config(&world).await;
    let closed = world.with("OUTLOOK_PLUGIN_CONFIG", &cfg);
    let c = closed.client(&["serve"]).await;
    let names = c.tool_names().await;
    let args = [
        create_args("finance", "abc", "att-0", &key(1)),
        json!({"handoffId": UNKNOWN_ID}),
    ];
    for (tool, args) in HANDOFF_TOOLS.iter().zip(&args) {
        assert!(
            !names.contains(&(*tool).to_owned()),
            "{tool} must be absent"
        );
        assert_eq!(
            c.protocol_refusal(tool, args.clone()).await,
            format!(
                "tool {tool} is not in this catalog: it needs PLUGIN_ALLOW_LOCAL_HANDOFFS=true"
            )
        );
    }
    c.close().await;
    // The CLI reaches the same catalog: an unknown tool is a usage error (exit 2).
    let (code, v) = call(&closed, "get_attachment_handoff", &args[1]).await;
    assert_eq!(code, Some(2), "{v}");
    assert_eq!(v["protocolError"], "invalid_params");
    assert!(
        !root(&closed).exists(),
        "no handoff root without the handoff gate"
    );

    let open = closed.with("PLUGIN_ALLOW_LOCAL_HANDOFFS", "false");
    let c = open.client(&["serve"]).await;
    let names = c.tool_names().await;
    assert!(
        HANDOFF_TOOLS
            .iter()
            .all(|t| !names.contains(&(*t).to_owned()))
    );
    c.close().await;

    let open = open.with("PLUGIN_ALLOW_LOCAL_HANDOFFS", "true");
    let c = open.client(&["serve"]).await;
    let names = c.tool_names().await;
    assert!(
        HANDOFF_TOOLS
            .iter()
            .all(|t| names.contains(&(*t).to_owned()))
    );
    c.close().await;
    assert_eq!(
        sorted_names(&root(&open)),
        [".key", ".lock"],
        "created empty at startup"
    );
}

#[tokio::test]
async fn create_get_and_replay_end_to_end_with_every_refusal() {
    let world = handoff_world().await;
    let (pdf, csv, _) = finance_messages(&world).await;
    let c = world.client(&["serve"]).await;
    let mut answers: Vec<String> = Vec::new();
    let mut keep = |r: &CallToolResult| answers.push(serde_json::to_string(r).unwrap());

    // Create.
    let k = key(1);
    let raw = c
        .call(
            "create_attachment_handoff",
            create_args("finance", &pdf, "att-0", &k),
        )
        .await
        .unwrap();
    keep(&raw);
    assert_ne!(raw.is_error, Some(true), "{}", text_of(&raw));
    let created = raw.structured_content.clone().unwrap();
    let id = created["handoffId"].as_str().unwrap().to_owned();
    let id_pattern = regex::Regex::new(r"^oh_[A-Za-z0-9_-]{43}$").unwrap();
    assert!(id_pattern.is_match(&id), "{id}");
    assert_eq!(created["size"], PDF_SIZE);
    assert_eq!(created["status"], "ready");
    assert_eq!(created["replayed"], false);
    assert_eq!(created["dataTrust"], "UNTRUSTED_EMAIL_DATA_V1");
    assert_eq!(created["contentType"], "application/pdf");
    assert!(text_of(&raw).contains(&format!("mailgate handoff path {id}")));

    // On disk: exactly one private bundle whose payload is what the answer describes.
    assert_eq!(
        sorted_names(&root(&world)),
        [".key".to_owned(), ".lock".to_owned(), id.clone()]
    );
    let dir = bundle(&world, &id);
    assert_eq!(sorted_names(&dir), ["manifest.json", "payload.bin"]);
    let payload = std::fs::read(dir.join("payload.bin")).unwrap();
    assert_eq!(payload.len() as u64, PDF_SIZE);
    assert!(payload.starts_with(b"%PDF"));
    assert_eq!(
        created["sha256"].as_str().unwrap(),
        hex::encode(sha2::Sha256::digest(&payload))
    );
    assert_eq!(mode(&root(&world)), 0o700);
    assert_eq!(mode(&root(&world).join(".lock")), 0o600);
    assert_eq!(mode(&root(&world).join(".key")), 0o600);
    assert_eq!(std::fs::read(root(&world).join(".key")).unwrap().len(), 32);
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("payload.bin")), 0o600);
    assert_eq!(mode(&dir.join("manifest.json")), 0o600);

    // Get: the same projection.
    let raw = c
        .call("get_attachment_handoff", json!({"handoffId": id}))
        .await
        .unwrap();
    keep(&raw);
    let got = raw.structured_content.clone().unwrap();
    assert_eq!(projection(&got), projection(&created));
    assert_eq!(got["replayed"], false);
    assert_eq!(got["dataTrust"], "UNTRUSTED_EMAIL_DATA_V1");

    // The same key (in either case) replays: same bundle, nothing new on disk.
    for k in [k.clone(), k.to_uppercase()] {
        let raw = c
            .call(
                "create_attachment_handoff",
                create_args("finance", &pdf, "att-0", &k),
            )
            .await
            .unwrap();
        keep(&raw);
        let again = raw.structured_content.clone().unwrap();
        assert_eq!(again["replayed"], true, "{k}: {again}");
        assert_eq!(projection(&again), projection(&created));
        assert_eq!(bundles(&world), [id.as_str()]);
    }

    // The same key for another request is a mismatch, and writes nothing.
    for (mailbox, message, attachment) in [
        ("finance", csv.as_str(), "att-0"),
        ("finance", pdf.as_str(), "att-1"),
        ("personal", pdf.as_str(), "att-0"),
    ] {
        let raw = c
            .call(
                "create_attachment_handoff",
                create_args(mailbox, message, attachment, &k),
            )
            .await
            .unwrap();
        keep(&raw);
        assert_eq!(
            error_of(&raw).0,
            "HANDOFF_IDEMPOTENCY_MISMATCH",
            "{mailbox} {attachment}"
        );
    }
    assert_eq!(bundles(&world), [id.as_str()]);

    // An unknown attachment: nothing on disk.
    let raw = c
        .call(
            "create_attachment_handoff",
            create_args("finance", &pdf, "att-9", &key(2)),
        )
        .await
        .unwrap();
    keep(&raw);
    assert_eq!(error_of(&raw).0, "ATTACHMENT_NOT_FOUND");
    assert_eq!(
        sorted_names(&root(&world)),
        [".key".to_owned(), ".lock".to_owned(), id.clone()]
    );

    // A read-narrowed alias is refused before any fetch.
    let archived = c.first_id("archive", json!({})).await;
    let raw = c
        .call(
            "create_attachment_handoff",
            create_args("archive", &archived, "att-0", &key(3)),
        )
        .await
        .unwrap();
    keep(&raw);
    assert_eq!(error_of(&raw).0, "POLICY_DENIED");
    assert_eq!(bundles(&world), [id.as_str()]);

    // An unknown well-formed id, then malformed ids (a protocol error, not a tool error).
    let raw = c
        .call("get_attachment_handoff", json!({"handoffId": UNKNOWN_ID}))
        .await
        .unwrap();
    keep(&raw);
    assert_eq!(error_of(&raw).0, "HANDOFF_NOT_FOUND");
    for bad in [
        "../../etc/passwd".to_owned(),
        format!("oh_{}", "A".repeat(42)),
        format!("oh_{}/", "A".repeat(42)),
        format!("{id}x"),
        "".to_owned(),
    ] {
        let result = c
            .call("get_attachment_handoff", json!({"handoffId": bad}))
            .await
            .unwrap();
        assert_eq!(error_of(&result).0, "INVALID_ARGUMENT", "{bad:?}");
    }
    c.close().await;

    let secrets = secrets(&world, &id);
    for answer in &answers {
        assert_clean(answer, &secrets);
    }
}

/// One way of editing a committed bundle behind mailgate's back.
#[derive(Clone, Copy, Debug)]
enum Tamper {
    PayloadByte,
    PayloadMode,
    ManifestMode,
    BundleMode,
    PayloadSymlink,
    PayloadHardLink,
    ManifestExtraField,
    ManifestTruncated,
    ExtraFile,
    /// See: issue 8, finding 10. A new payload with the manifest's `sha256` and `size` rewritten
    /// to match (canonical, 0600): only the seal (the manifest MAC) gives it away.
    PayloadReplacedWithDigest,
}

impl Tamper {
    const ALL: [Tamper; 10] = [
        Tamper::PayloadByte,
        Tamper::PayloadMode,
        Tamper::ManifestMode,
        Tamper::BundleMode,
        Tamper::PayloadSymlink,
        Tamper::PayloadHardLink,
        Tamper::ManifestExtraField,
        Tamper::ManifestTruncated,
        Tamper::ExtraFile,
        Tamper::PayloadReplacedWithDigest,
    ];

    /// Whether the manifest still reads, so the bundle still holds its idempotency key. When it
    /// does not, the key is free again (security.md §4: a later create writes a new bundle and
    /// never serves the corrupt one).
    fn keeps_key(self) -> bool {
        !matches!(
            self,
            Tamper::ManifestMode
                | Tamper::BundleMode
                | Tamper::ManifestExtraField
                | Tamper::ManifestTruncated
                | Tamper::PayloadReplacedWithDigest
        )
    }

    fn apply(self, dir: &Path, outside: &Path) {
        let payload = dir.join("payload.bin");
        let manifest = dir.join("manifest.json");
        match self {
            Tamper::PayloadByte => {
                let mut bytes = std::fs::read(&payload).unwrap();
                let last = bytes.len() - 1;
                bytes[last] ^= 0x20;
                std::fs::write(&payload, bytes).unwrap();
                assert_eq!(mode(&payload), 0o600, "only the content changed");
            }
            Tamper::PayloadMode => set_mode(&payload, 0o644),
            Tamper::ManifestMode => set_mode(&manifest, 0o644),
            Tamper::BundleMode => set_mode(dir, 0o755),
            Tamper::PayloadSymlink => {
                let copy = outside.join("copy.bin");
                std::fs::copy(&payload, &copy).unwrap();
                set_mode(&copy, 0o600);
                std::fs::remove_file(&payload).unwrap();
                std::os::unix::fs::symlink(&copy, &payload).unwrap();
            }
            Tamper::PayloadHardLink => {
                std::fs::hard_link(&payload, outside.join("linked.bin")).unwrap();
                assert_eq!(
                    std::os::unix::fs::MetadataExt::nlink(&std::fs::metadata(&payload).unwrap()),
                    2
                );
            }
            Tamper::ManifestExtraField => {
                let text = String::from_utf8(std::fs::read(&manifest).unwrap()).unwrap();
                let body = text
                    .strip_suffix("\n}\n")
                    .expect("the canonical manifest ending");
                std::fs::write(&manifest, format!("{body},\n  \"extra\": true\n}}\n")).unwrap();
            }
            Tamper::ManifestTruncated => {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&manifest)
                    .unwrap();
                let len = file.metadata().unwrap().len();
                file.set_len(len / 2).unwrap();
            }
            Tamper::ExtraFile => {
                let extra = dir.join("notes.txt");
                std::fs::write(&extra, b"x").unwrap();
                set_mode(&extra, 0o600);
            }
            Tamper::PayloadReplacedWithDigest => {
                let forged: &[u8] = b"%PDF-1.7 forged invoice, pay to another account";
                let text = std::fs::read_to_string(&manifest).unwrap();
                let old: Value = serde_json::from_str(&text).unwrap();
                let edited = text
                    .replace(
                        old["sha256"].as_str().unwrap(),
                        &hex::encode(sha2::Sha256::digest(forged)),
                    )
                    .replace(
                        &format!("\"size\": {},", old["size"]),
                        &format!("\"size\": {},", forged.len()),
                    );
                assert_ne!(edited, text);
                std::fs::write(&manifest, edited).unwrap();
                std::fs::write(&payload, forged).unwrap();
                assert_eq!(mode(&payload), 0o600, "only the contents changed");
                assert_eq!(mode(&manifest), 0o600, "only the contents changed");
            }
        }
    }
}

#[tokio::test]
async fn tampered_bundles_are_refused_as_corrupt_and_never_served() {
    let world = handoff_world().await;
    let (pdf, _, _) = finance_messages(&world).await;
    let c = world.client(&["serve"]).await;
    let outside = world.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let create = |k: String| {
        let c = &c;
        let pdf = pdf.clone();
        async move {
            c.call(
                "create_attachment_handoff",
                create_args("finance", &pdf, "att-0", &k),
            )
            .await
            .unwrap()
        }
    };
    let get = |id: String| {
        let c = &c;
        async move {
            c.call("get_attachment_handoff", json!({"handoffId": id}))
                .await
                .unwrap()
        }
    };

    for (n, tamper) in (100..).zip(Tamper::ALL) {
        let k = key(n);
        let fresh = create(k.clone()).await;
        let fresh = fresh.structured_content.unwrap();
        assert_eq!(fresh["replayed"], false, "{tamper:?}");
        let id = fresh["handoffId"].as_str().unwrap().to_owned();
        let ok = get(id.clone()).await;
        assert_ne!(
            ok.is_error,
            Some(true),
            "{tamper:?}: untouched bundles verify"
        );

        tamper.apply(&bundle(&world, &id), &outside);
        let refused = get(id.clone()).await;
        assert_eq!(
            error_of(&refused),
            ("HANDOFF_INVALID".to_owned(), Some("corrupt".to_owned())),
            "{tamper:?}"
        );
        assert!(refused.structured_content.is_none(), "{tamper:?}");
        let answer = serde_json::to_string(&refused).unwrap();
        assert!(!answer.contains("payload.bin"), "{answer}");
        assert!(!answer.contains(&world.state().display().to_string()));

        let again = create(k.clone()).await;
        if tamper.keeps_key() {
            // The key still names the corrupt bundle: the replay revalidates and refuses.
            assert_eq!(
                error_of(&again),
                ("HANDOFF_INVALID".to_owned(), Some("corrupt".to_owned())),
                "{tamper:?}"
            );
        } else {
            // The manifest no longer reads, so the key is free: a new bundle, never the corrupt
            // one.
            assert_ne!(
                again.is_error,
                Some(true),
                "{tamper:?}: {}",
                text_of(&again)
            );
            let again = again.structured_content.unwrap();
            assert_eq!(again["replayed"], false, "{tamper:?}");
            assert_ne!(again["handoffId"], id.as_str(), "{tamper:?}");
        }
        // Still refused, and left in place (the store never deletes what it does not trust).
        assert_eq!(error_of(&get(id.clone()).await).0, "HANDOFF_INVALID");
        assert!(bundle(&world, &id).is_dir(), "{tamper:?}");
    }

    // A bundle without its manifest is invisible: not found, and its key is free.
    let k = key(200);
    let fresh = create(k.clone()).await.structured_content.unwrap();
    let id = fresh["handoffId"].as_str().unwrap().to_owned();
    std::fs::remove_file(bundle(&world, &id).join("manifest.json")).unwrap();
    assert_eq!(error_of(&get(id.clone()).await).0, "HANDOFF_NOT_FOUND");
    let again = create(k).await.structured_content.unwrap();
    assert_eq!(again["replayed"], false);
    assert_ne!(again["handoffId"], id.as_str());
    c.close().await;
}

#[tokio::test]
async fn a_crash_at_any_step_leaves_nothing_visible_and_is_swept() {
    let points = [
        ("after_payload_temp", &[".payload.bin.tmp"][..]),
        ("after_payload_rename", &["payload.bin"][..]),
        (
            "during_manifest",
            &[".manifest.json.tmp", "payload.bin"][..],
        ),
        ("before_commit", &[".manifest.json.tmp", "payload.bin"][..]),
    ];
    let runs = points.iter().map(|&(point, left)| async move {
        let world = handoff_world().await;
        let (pdf, _, _) = finance_messages(&world).await;
        let args = create_args("finance", &pdf, "att-0", &key(7)).to_string();
        let out = command(&world, &["call", "create_attachment_handoff", &args])
            .env("MAILGATE_TEST_HANDOFF_CRASH_AT", point)
            .output()
            .await
            .unwrap();
        assert!(!out.status.success(), "{point}");
        assert_eq!(out.status.code(), None, "{point}: killed, not exited");
        assert_eq!(out.status.signal(), Some(6), "{point}: SIGABRT");
        assert!(out.stdout.is_empty(), "{point}: no answer");

        // One uncommitted bundle, exactly as far as the create got; no manifest anywhere.
        let left_behind = bundles(&world);
        assert_eq!(left_behind.len(), 1, "{point}: {left_behind:?}");
        assert!(committed(&world).is_empty(), "{point}");
        let dir = bundle(&world, &left_behind[0]);
        assert_eq!(sorted_names(&dir), left, "{point}");
        if point == "during_manifest" {
            let half = std::fs::read(dir.join(".manifest.json.tmp")).unwrap();
            assert!(
                serde_json::from_slice::<Value>(&half).is_err(),
                "half written"
            );
        }

        // Invisible to a reader, and the reader's startup sweeps it away.
        let code = call_err(
            &world,
            "get_attachment_handoff",
            &json!({"handoffId": left_behind[0]}),
        )
        .await;
        assert_eq!(code, "HANDOFF_NOT_FOUND", "{point}");
        assert_eq!(sorted_names(&root(&world)), [".key", ".lock"], "{point}");

        // The key was never bound: a retry creates a fresh bundle.
        let v = call_ok(
            &world,
            "create_attachment_handoff",
            &create_args("finance", &pdf, "att-0", &key(7)),
        )
        .await;
        assert_eq!(v["replayed"], false, "{point}");
        assert_ne!(v["handoffId"], left_behind[0].as_str());
        assert_eq!(committed(&world), [v["handoffId"].as_str().unwrap()]);
        assert_eq!(bundles(&world).len(), 1);
    });
    futures::future::join_all(runs).await;
}

#[tokio::test]
async fn the_entry_quota_refuses_the_fourth_create() {
    let world = limited_world(r#", "maxHandoffStoreEntries": 3"#).await;
    let (pdf, csv, json_msg) = finance_messages(&world).await;
    let creates = [
        (pdf.as_str(), key(1)),
        (csv.as_str(), key(2)),
        (json_msg.as_str(), key(3)),
    ];
    let mut ids = Vec::new();
    for (message, k) in &creates {
        let v = call_ok(
            &world,
            "create_attachment_handoff",
            &create_args("finance", message, "att-0", k),
        )
        .await;
        ids.push(v["handoffId"].as_str().unwrap().to_owned());
    }
    let (code, v) = call(
        &world,
        "create_attachment_handoff",
        &create_args("finance", &pdf, "att-0", &key(4)),
    )
    .await;
    assert_eq!(code, Some(1));
    assert_eq!(v["error"]["code"], "HANDOFF_QUOTA_EXCEEDED");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("maxHandoffStoreEntries"),
        "{v}"
    );
    ids.sort();
    assert_eq!(bundles(&world), ids, "no leftover uncommitted bundle");
    assert_eq!(committed(&world), ids);
    // A full store still replays an existing key.
    let v = call_ok(
        &world,
        "create_attachment_handoff",
        &create_args("finance", &pdf, "att-0", &key(1)),
    )
    .await;
    assert_eq!(v["replayed"], true);
}

#[tokio::test]
async fn byte_quotas_refuse_before_anything_is_written() {
    // The PDF is 1034 bytes: over a 1024-byte attachment cap, whatever the store holds.
    let world =
        limited_world(r#", "maxHandoffAttachmentBytes": 1024, "maxHandoffStoreBytes": 1048576"#)
            .await;
    let (pdf, csv, _) = finance_messages(&world).await;
    let code = call_err(
        &world,
        "create_attachment_handoff",
        &create_args("finance", &pdf, "att-0", &key(1)),
    )
    .await;
    assert_eq!(code, "ATTACHMENT_TOO_LARGE");
    assert_eq!(
        sorted_names(&root(&world)),
        [".key", ".lock"],
        "nothing written"
    );
    // A smaller attachment fits.
    call_ok(
        &world,
        "create_attachment_handoff",
        &create_args("finance", &csv, "att-0", &key(2)),
    )
    .await;
    assert_eq!(committed(&world).len(), 1);

    // 2100 store bytes hold exactly two PDFs (2068 bytes); a third is over the store quota.
    let world =
        limited_world(r#", "maxHandoffAttachmentBytes": 2048, "maxHandoffStoreBytes": 2100"#).await;
    for n in 1..=2 {
        call_ok(
            &world,
            "create_attachment_handoff",
            &create_args("finance", &pdf, "att-0", &key(n)),
        )
        .await;
    }
    let (code, v) = call(
        &world,
        "create_attachment_handoff",
        &create_args("finance", &pdf, "att-0", &key(3)),
    )
    .await;
    assert_eq!(code, Some(1));
    assert_eq!(v["error"]["code"], "HANDOFF_QUOTA_EXCEEDED");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("maxHandoffStoreBytes"),
        "{v}"
    );
    assert_eq!(bundles(&world).len(), 2);
    assert_eq!(committed(&world).len(), 2);
}

/// Whether a `mailgate call` was turned away because the store lock stayed taken: at startup
/// (the sweep; no JSON, exit 1) or in the call (`HANDOFF_BUSY`). Both mean "retry".
fn busy(out: &Output) -> bool {
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code() == Some(1) && stderr.contains("locked by another process"))
        || serde_json::from_slice::<Value>(&out.stdout)
            .is_ok_and(|v| v["error"]["code"] == "HANDOFF_BUSY")
}

/// Bundles staged and not committed (their manifest is still the temp file).
fn staged(world: &World) -> usize {
    bundles(world)
        .iter()
        .filter(|n| root(world).join(n).join(".manifest.json.tmp").exists())
        .count()
}

/// Runs one `mailgate call create_attachment_handoff` per key, all racing for the store lock,
/// and returns each one's answer.
///
/// Ordering, not timing: each process is started with the debug-build hook
/// `MAILGATE_TEST_HANDOFF_CRASH_AT=hold_before_lock`, so it stages its bundle and then waits
/// for a shared lock on a release file the test holds. Once every process is parked there
/// (every bundle staged), the test unlocks it and all of them decide at once: the lock alone keeps the quota
/// and the one commit per key. A process the lock kept out for its whole retry budget (a
/// documented "retry" answer, possible on a loaded machine) is run again on its own; what is
/// checked is the outcome of the race, not its speed.
async fn concurrent_creates(world: &World, message: &str, keys: &[String]) -> Vec<Value> {
    let release = root(world).join(".test-release");
    let gate = std::fs::File::create(&release).unwrap();
    gate.lock().unwrap();
    let args: Vec<String> = keys
        .iter()
        .map(|k| create_args("finance", message, "att-0", k).to_string())
        .collect();
    let mut children: Vec<_> = args
        .iter()
        .map(|a| {
            command(world, &["call", "create_attachment_handoff", a])
                .env("MAILGATE_TEST_HANDOFF_CRASH_AT", "hold_before_lock")
                .spawn()
                .unwrap()
        })
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let exited = children
            .iter_mut()
            .map(|c| c.try_wait().unwrap().is_some())
            .filter(|done| *done)
            .count();
        let parked = staged(world);
        if parked + exited == children.len() {
            assert_eq!(parked, children.len(), "every process reached the lock");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{parked} of {} processes reached the store lock",
            children.len()
        );
        // A poll interval while waiting for the condition, not a wait for time to pass.
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    gate.unlock().unwrap();
    let outputs = futures::future::join_all(children.into_iter().map(|c| c.wait_with_output()));
    let mut results = Vec::new();
    for (out, a) in outputs.await.into_iter().zip(&args) {
        let mut out = out.unwrap();
        for _ in 0..10 {
            if !busy(&out) {
                break;
            }
            out = command(world, &["call", "create_attachment_handoff", a])
                .output()
                .await
                .unwrap();
        }
        let (code, v) = parse_call(&out);
        assert!(matches!(code, Some(0 | 1)), "{code:?}: {v}");
        results.push(v);
    }
    std::fs::remove_file(&release).unwrap();
    results
}

#[tokio::test]
async fn concurrent_processes_never_overshoot_the_entry_quota() {
    let world = limited_world(r#", "maxHandoffStoreEntries": 5"#).await;
    let (pdf, _, _) = finance_messages(&world).await;
    let keys: Vec<String> = (0..16).map(|n| key(1000 + n)).collect();
    let results = concurrent_creates(&world, &pdf, &keys).await;
    let ok: Vec<&Value> = results.iter().filter(|v| v["status"] == "ready").collect();
    let refused: Vec<&str> = results
        .iter()
        .filter_map(|v| v["error"]["code"].as_str())
        .collect();
    assert_eq!(ok.len(), 5, "{results:?}");
    assert_eq!(refused.len(), 11, "{results:?}");
    assert!(
        refused.iter().all(|c| *c == "HANDOFF_QUOTA_EXCEEDED"),
        "{refused:?}"
    );
    assert!(ok.iter().all(|v| v["replayed"] == false));
    let mut ids: Vec<String> = ok
        .iter()
        .map(|v| v["handoffId"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    assert_eq!(committed(&world), ids);
    assert_eq!(
        bundles(&world),
        ids,
        "every refused create discarded its staging"
    );
}

#[tokio::test]
async fn concurrent_processes_with_one_key_commit_once() {
    let world = handoff_world().await;
    let (pdf, _, _) = finance_messages(&world).await;
    let keys = vec![key(42); 16];
    let results = concurrent_creates(&world, &pdf, &keys).await;
    for v in &results {
        assert_eq!(v["status"], "ready", "{v}");
    }
    let first = results[0]["handoffId"].as_str().unwrap();
    assert!(
        results.iter().all(|v| v["handoffId"] == first),
        "{results:?}"
    );
    let fresh = results.iter().filter(|v| v["replayed"] == false).count();
    assert_eq!(fresh, 1, "exactly one process committed");
    assert_eq!(bundles(&world), [first]);
    assert_eq!(committed(&world), [first]);
}

async fn drafts_total(c: &Client, mailbox: &str) -> u64 {
    c.ok(
        "get_folder_stats",
        json!({"mailbox": mailbox, "folderId": "drafts"}),
    )
    .await["totalEmails"]
        .as_u64()
        .unwrap()
}

#[tokio::test]
async fn drafts_attach_a_verified_handoff_only_in_its_own_mailbox() {
    let world = handoff_world().await;
    let downloads = world.path().join("downloads");
    let world = world
        .with("PLUGIN_ALLOW_WRITES", "true")
        .with("MAILGATE_DOWNLOAD_DIR", &downloads.display().to_string());
    let (pdf, _, _) = finance_messages(&world).await;
    let c = world.client(&["serve"]).await;
    let create = |k: String| {
        let c = &c;
        let pdf = pdf.clone();
        async move {
            let v = c
                .ok(
                    "create_attachment_handoff",
                    create_args("finance", &pdf, "att-0", &k),
                )
                .await;
            v["handoffId"].as_str().unwrap().to_owned()
        }
    };
    let draft = |mailbox: &'static str, id: String| {
        json!({"mailbox": mailbox, "to": ["ana.lima@example.com"], "subject": "Handed off",
               "body": "See the attachment.", "attachments": [{"handoffId": id}]})
    };
    let (finance_before, personal_before) = (
        drafts_total(&c, "finance").await,
        drafts_total(&c, "personal").await,
    );

    // In its own mailbox: attached with the bytes of the bundle.
    let id = create(key(1)).await;
    let payload = std::fs::read(bundle(&world, &id).join("payload.bin")).unwrap();
    let out = c.ok("create_draft", draft("finance", id.clone())).await;
    assert_eq!(out["attachmentsCount"], 1, "{out}");
    let draft_id = out["draftId"].as_str().unwrap().to_owned();
    assert_eq!(drafts_total(&c, "finance").await, finance_before + 1);
    let msg = c
        .ok(
            "get_message",
            json!({"mailbox": "finance", "messageId": draft_id}),
        )
        .await;
    assert_eq!(msg["message"]["folderId"], "Drafts");
    let attached = &msg["message"]["attachments"][0];
    assert_eq!(attached["size"], PDF_SIZE, "{attached}");
    let content = c
        .ok(
            "get_attachment_content",
            json!({"mailbox": "finance", "messageId": draft_id,
                   "attachmentId": attached["id"], "mode": "raw"}),
        )
        .await;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(content["base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(bytes, payload);

    // Into another mailbox's draft: refused, nothing written.
    let code = c
        .tool_error("create_draft", draft("personal", id.clone()))
        .await;
    assert_eq!(code, "POLICY_DENIED");
    assert_eq!(drafts_total(&c, "personal").await, personal_before);

    // A tampered handoff: refused as corrupt, no draft.
    let id = create(key(2)).await;
    let path = bundle(&world, &id).join("payload.bin");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[10] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();
    let raw = c
        .call("create_draft", draft("finance", id.clone()))
        .await
        .unwrap();
    assert_eq!(
        error_of(&raw),
        ("HANDOFF_INVALID".to_owned(), Some("corrupt".to_owned()))
    );
    // An unknown handoff: not found, no draft.
    let code = c
        .tool_error("create_draft", draft("finance", UNKNOWN_ID.to_owned()))
        .await;
    assert_eq!(code, "HANDOFF_NOT_FOUND");
    assert_eq!(drafts_total(&c, "finance").await, finance_before + 1);
    c.close().await;
}
