//! `mailgate handoff list|verify|path|remove|prune`: the operator's view of the handoff store.
//! Bundles are created through the real binary (`call create_attachment_handoff` with the gate
//! open); the operator commands then run with no plugin.json and the gate closed.

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;
use sha2::Digest as _;

use crate::util::{World, demo_config, handoff_world};

/// A planted bundle name: well-formed, never issued.
const PLANTED: &str = "oh_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

/// Forgets the config and closes the gate: the operator commands must not need either.
fn operator(mut world: World) -> World {
    world.env.remove("OUTLOOK_PLUGIN_CONFIG");
    world.env.remove("PLUGIN_ALLOW_LOCAL_HANDOFFS");
    world
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn root(world: &World) -> PathBuf {
    world.state().join("handoffs")
}

/// The id of the first finance demo message with an attachment (`att-0`, a PDF).
async fn finance_message(world: &World) -> String {
    let out = world
        .run(&[
            "call",
            "list_messages",
            r#"{"mailbox":"finance","criteria":{"hasAttachments":true,"maxResults":3}}"#,
        ])
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["messages"][0]["id"].as_str().unwrap().to_owned()
}

/// Creates a bundle through the tool and returns its structured result.
async fn create(world: &World, message: &str, key: &str) -> Value {
    let args = serde_json::json!({
        "mailbox": "finance",
        "messageId": message,
        "attachmentId": "att-0",
        "idempotencyKey": key,
    })
    .to_string();
    let out = world
        .run(&["call", "create_attachment_handoff", &args])
        .await;
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "ready", "{v}");
    v
}

async fn handoff(world: &World, args: &[&str]) -> Output {
    let mut all = vec!["handoff"];
    all.extend_from_slice(args);
    world.run(&all).await
}

fn lines(out: &Output) -> Vec<Vec<String>> {
    stdout(out)
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

#[tokio::test]
async fn list_path_verify_and_remove_a_bundle() {
    let world = handoff_world().await;
    let message = finance_message(&world).await;
    let created = create(&world, &message, "0b7c7e8e-3f0a-4c1e-9d2b-1a2b3c4d5e6f").await;
    let id = created["handoffId"].as_str().unwrap().to_owned();
    let sha = created["sha256"].as_str().unwrap().to_owned();
    let world = operator(world);

    let listed = handoff(&world, &["list"]).await;
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    assert_eq!(
        lines(&listed),
        vec![vec![
            id.clone(),
            "ready".into(),
            created["size"].to_string(),
            sha.clone(),
            created["createdAt"].as_str().unwrap().to_owned(),
            "finance".into(),
            created["filename"].as_str().unwrap().to_owned(),
        ]]
    );

    let path = handoff(&world, &["path", &id]).await;
    assert_eq!(path.status.code(), Some(0), "{}", stderr(&path));
    let dir = PathBuf::from(stdout(&path).trim_end_matches('\n'));
    assert!(dir.is_absolute(), "{dir:?}");
    assert_eq!(dir, root(&world).join(&id));
    let payload = std::fs::read(dir.join("payload.bin")).unwrap();
    assert!(payload.starts_with(b"%PDF"), "the demo attachment is a PDF");
    assert_eq!(hex::encode(sha2::Sha256::digest(&payload)), sha);

    let verified = handoff(&world, &["verify"]).await;
    assert_eq!(verified.status.code(), Some(0), "{}", stderr(&verified));
    assert_eq!(stdout(&verified), format!("{id}\tok\n"));

    // One flipped payload byte: same size, wrong digest.
    let mut tampered = payload.clone();
    tampered[0] ^= 0x01;
    std::fs::write(dir.join("payload.bin"), &tampered).unwrap();
    let verified = handoff(&world, &["verify"]).await;
    assert_eq!(verified.status.code(), Some(1));
    let text = stdout(&verified);
    assert!(text.starts_with(&format!("{id}\tcorrupt: ")), "{text}");
    assert!(text.contains("SHA-256"), "{text}");
    let refused = handoff(&world, &["path", &id]).await;
    assert_eq!(refused.status.code(), Some(1));
    assert!(refused.stdout.is_empty(), "no path for a corrupt bundle");
    assert!(stderr(&refused).contains("corrupt"), "{}", stderr(&refused));
    // `list` never calls a bundle `ready` that the server would refuse (the manifest and its
    // MAC are intact here; only the payload changed).
    let relisted = handoff(&world, &["list"]).await;
    assert_eq!(relisted.status.code(), Some(0));
    assert_eq!(
        lines(&relisted),
        vec![vec![
            id.clone(),
            "corrupt".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ]]
    );
    for out in [&listed, &verified, &refused, &relisted] {
        let all = [out.stdout.as_slice(), out.stderr.as_slice()].concat();
        assert!(
            !all.windows(4).any(|w| w == b"%PDF"),
            "no payload bytes in messages"
        );
    }

    let removed = handoff(&world, &["remove", &id]).await;
    assert_eq!(removed.status.code(), Some(0), "{}", stderr(&removed));
    assert!(!dir.exists(), "the bundle directory is gone");
    let listed = handoff(&world, &["list"]).await;
    assert_eq!(listed.status.code(), Some(0));
    assert_eq!(stdout(&listed), "", "the lock file is not an entry");
    assert_eq!(handoff(&world, &["path", &id]).await.status.code(), Some(1));
    let again = handoff(&world, &["remove", &id]).await;
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("no such handoff"),
        "{}",
        stderr(&again)
    );
}

// See: issue 8, finding 10. The program `handoff path` hands a folder to can write that folder
// but not the root's `.key`: a consistent forgery (new payload, sha256 and size rewritten) and a
// store whose key went missing or was replaced are never served again.
#[tokio::test]
async fn issue_8_a_bundle_forged_in_its_folder_is_never_served_again() {
    let world = handoff_world().await;
    let message = finance_message(&world).await;
    let created = create(&world, &message, "7e0a2a43-5b1c-4f6e-8f0a-9c3d2b1a0e9f").await;
    let id = created["handoffId"].as_str().unwrap().to_owned();
    let other = create(&world, &message, "5d1e0c2b-9a8f-4e7d-8c6b-5a4f3e2d1c0b").await;
    let other = other["handoffId"].as_str().unwrap().to_owned();
    let world = operator(world);
    let path = handoff(&world, &["path", &id]).await;
    assert_eq!(path.status.code(), Some(0), "{}", stderr(&path));
    let dir = PathBuf::from(stdout(&path).trim_end_matches('\n'));

    // The local program, working only inside `dir`.
    let forged: &[u8] = b"%PDF-1.7 forged: pay to another account";
    let manifest = dir.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let rewritten = text
        .replace(
            created["sha256"].as_str().unwrap(),
            &hex::encode(sha2::Sha256::digest(forged)),
        )
        .replace(
            &format!("\"size\": {},", created["size"]),
            &format!("\"size\": {},", forged.len()),
        );
    assert_ne!(rewritten, text);
    std::fs::write(&manifest, rewritten).unwrap();
    std::fs::write(dir.join("payload.bin"), forged).unwrap();

    let refused = handoff(&world, &["path", &id]).await;
    assert_eq!(refused.status.code(), Some(1), "{}", stdout(&refused));
    assert!(refused.stdout.is_empty(), "no path for a forged bundle");
    assert!(stderr(&refused).contains("MAC"), "{}", stderr(&refused));
    let verified = handoff(&world, &["verify"]).await;
    assert_eq!(verified.status.code(), Some(1));
    assert!(
        stdout(&verified)
            .lines()
            .any(|l| l.starts_with(&format!("{id}\tcorrupt: "))),
        "{}",
        stdout(&verified)
    );
    let listed = handoff(&world, &["list"]).await;
    let states: Vec<[String; 2]> = lines(&listed)
        .into_iter()
        .map(|l| [l[0].clone(), l[1].clone()])
        .collect();
    assert!(
        states.contains(&[id.clone(), "corrupt".to_owned()]),
        "{states:?}"
    );
    assert!(
        states.contains(&[other.clone(), "ready".to_owned()]),
        "{states:?}"
    );

    // The key file is part of the guarantee: replaced or removed, nothing is served, and the
    // CLI never makes a new one.
    assert_eq!(
        handoff(&world, &["path", &other]).await.status.code(),
        Some(0)
    );
    let key = root(&world).join(".key");
    let mut secret = std::fs::read(&key).unwrap();
    secret[31] ^= 0x80;
    std::fs::write(&key, &secret).unwrap();
    let replaced = handoff(&world, &["path", &other]).await;
    assert_eq!(replaced.status.code(), Some(1));
    assert!(replaced.stdout.is_empty());
    std::fs::remove_file(&key).unwrap();
    let missing = handoff(&world, &["path", &other]).await;
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("no key"), "{}", stderr(&missing));
    assert!(!key.exists(), "the CLI creates no key");
}

/// Re-seals an edited manifest with the store key, as only a holder of `<root>/.key` can: the
/// operator's own uid, not a program confined to a bundle folder (handoff::key). Without this
/// the edit is refused as corrupt (see the issue-8 tests).
fn reseal(root: &std::path::Path, manifest: &str) -> String {
    use hmac::{KeyInit as _, Mac as _};
    let key = std::fs::read(root.join(".key")).unwrap();
    let at = manifest.find(",\n  \"mac\": \"").unwrap();
    let hex_start = at + ",\n  \"mac\": \"".len();
    let sealed = format!("{}\n}}\n", &manifest[..at]);
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(b"mailgate handoff manifest v2\n");
    mac.update(sealed.as_bytes());
    let tag = hex::encode(mac.finalize().into_bytes());
    format!(
        "{}{tag}{}",
        &manifest[..hex_start],
        &manifest[hex_start + 64..]
    )
}

#[tokio::test]
async fn prune_removes_expired_and_uncommitted_bundles_and_leaves_foreign_entries() {
    let world = handoff_world().await;
    let message = finance_message(&world).await;
    let kept = create(&world, &message, "11111111-1111-4111-8111-111111111111").await;
    let old = create(&world, &message, "22222222-2222-4222-8222-222222222222").await;
    let kept = kept["handoffId"].as_str().unwrap().to_owned();
    let old_size = old["size"].to_string();
    let old = old["handoffId"].as_str().unwrap().to_owned();
    let world = operator(world);
    let root = root(&world);

    // Backdate one manifest (still canonical, still 0600): the bundle is past its TTL.
    let manifest = root.join(&old).join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let start = text.find("\"createdAt\": \"").unwrap() + "\"createdAt\": \"".len();
    let end = start + text[start..].find('"').unwrap();
    let backdated = format!("{}2001-01-01T00:00:00Z{}", &text[..start], &text[end..]);
    std::fs::write(&manifest, reseal(&root, &backdated)).unwrap();
    // A crash leftover: a bundle directory with a payload and no manifest.
    let planted = root.join(PLANTED);
    std::fs::create_dir(&planted).unwrap();
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(planted.join("payload.bin"), b"partial").unwrap();
    std::fs::set_permissions(
        planted.join("payload.bin"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    // Something mailgate never writes.
    std::fs::write(root.join("notes.txt"), b"operator notes").unwrap();

    let listed = handoff(&world, &["list"]).await;
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    let states: Vec<(String, String)> = lines(&listed)
        .into_iter()
        .map(|l| {
            assert_eq!(l.len(), 7, "{l:?}");
            (l[0].clone(), l[1].clone())
        })
        .collect();
    let mut expected = vec![
        (kept.clone(), "ready".to_owned()),
        (old.clone(), "expired".to_owned()),
        (PLANTED.to_owned(), "uncommitted".to_owned()),
        ("notes.txt".to_owned(), "foreign".to_owned()),
    ];
    expected.sort();
    assert_eq!(states, expected);
    let text = stdout(&listed);
    assert!(
        text.contains(&format!("{PLANTED}\tuncommitted\t-\t-\t-\t-\t-\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{old}\texpired\t{old_size}\t")),
        "an expired bundle still shows its manifest: {text}"
    );

    let verified = handoff(&world, &["verify"]).await;
    assert_eq!(
        verified.status.code(),
        Some(1),
        "a foreign entry fails verify"
    );
    let text = stdout(&verified);
    for line in [
        format!("{kept}\tok"),
        format!("{old}\texpired"),
        format!("{PLANTED}\tuncommitted"),
        "notes.txt\tforeign".to_owned(),
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} in {text}");
    }
    let expired = handoff(&world, &["path", &old]).await;
    assert_eq!(expired.status.code(), Some(1));
    assert!(stderr(&expired).contains("expired"), "{}", stderr(&expired));

    let pruned = handoff(&world, &["prune"]).await;
    assert_eq!(pruned.status.code(), Some(0), "{}", stderr(&pruned));
    assert_eq!(
        stdout(&pruned),
        "pruned: 1 expired, 1 uncommitted removed; 0 in progress, 1 left in place\n"
    );
    assert!(!planted.exists(), "the uncommitted bundle is removed");
    assert!(!root.join(&old).exists(), "the expired bundle is removed");
    assert_eq!(
        std::fs::read(root.join("notes.txt")).unwrap(),
        b"operator notes",
        "a foreign file is left alone"
    );
    let states: Vec<(String, String)> = lines(&handoff(&world, &["list"]).await)
        .into_iter()
        .map(|l| (l[0].clone(), l[1].clone()))
        .collect();
    let mut expected = vec![
        (kept.clone(), "ready".to_owned()),
        ("notes.txt".to_owned(), "foreign".to_owned()),
    ];
    expected.sort();
    assert_eq!(states, expected);
    assert_eq!(
        handoff(&world, &["path", &kept]).await.status.code(),
        Some(0)
    );
}

#[tokio::test]
async fn a_missing_store_is_empty_and_is_never_created() {
    // No state folder at all.
    let world = World::new();
    for args in [&["list"][..], &["verify"]] {
        let out = handoff(&world, args).await;
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    let pruned = handoff(&world, &["prune"]).await;
    assert_eq!(pruned.status.code(), Some(0), "{}", stderr(&pruned));
    assert!(stdout(&pruned).starts_with("pruned: 0 expired, 0 uncommitted"));
    assert_eq!(
        handoff(&world, &["path", PLANTED]).await.status.code(),
        Some(1)
    );
    assert_eq!(
        handoff(&world, &["remove", PLANTED]).await.status.code(),
        Some(1)
    );
    assert!(!world.state().exists(), "nothing was created");

    // A state folder (the demo's) without a handoff root.
    demo_config(&world).await;
    for args in [&["list"][..], &["verify"], &["prune"]] {
        let out = handoff(&world, args).await;
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(
        handoff(&world, &["path", PLANTED]).await.status.code(),
        Some(1)
    );
    assert!(!root(&world).exists(), "state/handoffs was not created");
}

#[tokio::test]
async fn a_malformed_id_is_a_usage_error() {
    let world = World::new();
    let body = "A".repeat(42);
    for id in [
        "bad".to_owned(),
        "oh_short".to_owned(),
        "../etc".to_owned(),
        format!("oh_{body}/"),
        format!("oh_{body}AA"),
        format!("xx_{body}A"),
    ] {
        for command in ["path", "remove"] {
            let out = handoff(&world, &[command, &id]).await;
            assert_eq!(out.status.code(), Some(2), "{command} {id}");
            assert!(out.stdout.is_empty(), "{command} {id}");
        }
    }
    assert!(!world.state().exists(), "nothing was created");
}
