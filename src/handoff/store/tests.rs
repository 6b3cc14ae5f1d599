#![expect(
    clippy::disallowed_methods,
    reason = "tests tamper with bundles on the real filesystem inside a tempdir"
)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::alias::Alias;

const KEY: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

struct Fixture {
    tmp: tempfile::TempDir,
    store: HandoffStore,
}

fn limits() -> StoreLimits {
    StoreLimits {
        max_attachment_bytes: 1024,
        max_store_bytes: 4096,
        max_entries: 10,
        ttl: Duration::from_secs(3600),
    }
}

/// A temp dir is created 0755 (umask 022); the store's parent must be private.
fn private_tempdir() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    tmp
}

fn private_dir(path: &Path) {
    std::fs::create_dir(path).expect("mkdir");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).expect("chmod");
}

fn open_root(state: &Path) -> Dir {
    crate::path_guard::open_private_subdir(state, "handoffs", true).expect("root")
}

fn fixture_with(limits: StoreLimits) -> Fixture {
    let tmp = private_tempdir();
    let store = HandoffStore::new(open_root(tmp.path()), limits, None).expect("store");
    Fixture { tmp, store }
}

fn fixture() -> Fixture {
    fixture_with(limits())
}

impl Fixture {
    fn root(&self) -> PathBuf {
        self.tmp.path().join("handoffs")
    }

    fn bundle(&self, id: &HandoffId) -> PathBuf {
        self.root().join(id.as_str())
    }

    fn create(&self, request: &HandoffRequest, bytes: &[u8]) -> Result<Created, HandoffError> {
        self.store.create(
            request,
            SafeFileName::from_untrusted("report.pdf"),
            "application/pdf",
            bytes,
        )
    }

    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.root())
            .expect("read root")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n != LOCK && n != KEY_FILE)
            .collect();
        names.sort();
        names
    }
}

fn request(attachment: &str, key: &str) -> HandoffRequest {
    HandoffRequest::new(
        Alias::parse("finance").expect("alias"),
        "msg-1",
        attachment,
        key,
    )
}

fn key(n: usize) -> String {
    format!("0f8fad5b-d9cb-469f-a165-{n:012}")
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .expect("stat")
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn a_create_commits_a_private_bundle_that_reads_back() {
    let f = fixture();
    let created = f.create(&request("att-1", KEY), b"hello").expect("create");
    assert!(!created.replayed);
    let m = &created.manifest;
    assert_eq!(m.size, 5);
    assert_eq!(m.sha256, hex::encode(Sha256::digest(b"hello")));
    assert_eq!(f.names(), vec![m.id.to_string()]);
    let bundle = f.bundle(&m.id);
    assert_eq!(mode(&f.root()), 0o700);
    assert_eq!(mode(&bundle), 0o700);
    assert_eq!(mode(&bundle.join(PAYLOAD)), 0o600);
    assert_eq!(mode(&bundle.join(MANIFEST)), 0o600);
    assert_eq!(
        std::fs::read(bundle.join(PAYLOAD)).expect("payload"),
        b"hello"
    );
    assert_eq!(f.store.get(&m.id).expect("get"), *m);
    let (again, bytes) = f.store.read_payload(&m.id).expect("read");
    assert_eq!((&again, bytes.as_slice()), (m, &b"hello"[..]));
    assert_eq!(
        f.store.find_by_key(&request("att-1", &KEY.to_uppercase())),
        Ok(Some(m.clone()))
    );
}

#[test]
fn one_key_commits_once_and_binds_its_request() {
    let f = fixture();
    let first = f.create(&request("att-1", KEY), b"first").expect("create");
    // The same key again reaches the commit step (find_by_key is skipped here) and replays;
    // the stored bytes win.
    let again = f.create(&request("att-1", KEY), b"other").expect("replay");
    assert!(again.replayed);
    assert_eq!(again.manifest, first.manifest);
    assert_eq!(
        f.create(&request("att-2", KEY), b"x").map(|c| c.replayed),
        Err(HandoffError::IdempotencyMismatch)
    );
    assert_eq!(
        f.store.find_by_key(&request("att-2", KEY)),
        Err(HandoffError::IdempotencyMismatch)
    );
    assert_eq!(
        f.names().len(),
        1,
        "refused and replayed stages are discarded"
    );
}

/// Each tampering case, applied to a fresh bundle, must read as corrupt, and the key must not
/// be served either.
#[test]
fn every_tampering_is_detected() {
    type Tamper = fn(&Path);
    let cases: [(&str, Tamper); 10] = [
        ("one payload byte", |b| {
            let p = b.join(PAYLOAD);
            let mut bytes = std::fs::read(&p).expect("read");
            bytes[0] ^= 1;
            std::fs::write(&p, bytes).expect("write");
        }),
        ("payload 0644", |b| {
            std::fs::set_permissions(b.join(PAYLOAD), std::fs::Permissions::from_mode(0o644))
                .expect("chmod");
        }),
        ("manifest 0644", |b| {
            std::fs::set_permissions(b.join(MANIFEST), std::fs::Permissions::from_mode(0o644))
                .expect("chmod");
        }),
        ("bundle 0755", |b| {
            std::fs::set_permissions(b, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }),
        ("payload symlink", |b| {
            let copy = b.parent().expect("root").join("copy.bin");
            std::fs::copy(b.join(PAYLOAD), &copy).expect("copy");
            std::fs::remove_file(b.join(PAYLOAD)).expect("rm");
            std::os::unix::fs::symlink(&copy, b.join(PAYLOAD)).expect("symlink");
        }),
        ("payload hard link", |b| {
            let other = b.parent().expect("root").join("linked.bin");
            std::fs::hard_link(b.join(PAYLOAD), other).expect("link");
        }),
        ("extra manifest field", |b| {
            let p = b.join(MANIFEST);
            let text = std::fs::read_to_string(&p).expect("read");
            let edited = text.replacen("{\n", "{\n  \"path\": \"/tmp/x\",\n", 1);
            std::fs::write(&p, edited).expect("write");
        }),
        ("truncated manifest", |b| {
            let p = b.join(MANIFEST);
            let bytes = std::fs::read(&p).expect("read");
            std::fs::write(&p, &bytes[..bytes.len() / 2]).expect("write");
        }),
        ("extra file", |b| {
            std::fs::write(b.join("notes.txt"), b"x").expect("write");
        }),
        ("payload missing", |b| {
            std::fs::remove_file(b.join(PAYLOAD)).expect("rm");
        }),
    ];
    for (what, tamper) in cases {
        let f = fixture();
        let created = f
            .create(&request("att-1", KEY), b"payload")
            .expect("create");
        let id = created.manifest.id;
        tamper(&f.bundle(&id));
        assert!(
            matches!(f.store.get(&id), Err(HandoffError::Corrupt(_))),
            "{what}: {:?}",
            f.store.get(&id)
        );
        assert!(
            matches!(f.store.read_payload(&id), Err(HandoffError::Corrupt(_))),
            "{what}"
        );
        // Never served by key either (the manifest may no longer parse, in which case the key
        // is simply unknown and a new bundle would be made; both are safe).
        match f.store.find_by_key(&request("att-1", KEY)) {
            Err(HandoffError::Corrupt(_)) | Ok(None) => {}
            other => panic!("{what}: served by key: {other:?}"),
        }
    }
}

/// What a program given a bundle folder can do without the key: swap the payload and rewrite
/// the manifest's `sha256` and `size` so that it stays canonical and self-consistent.
fn replace_payload_consistently(bundle: &Path, bytes: &[u8]) {
    let manifest = bundle.join(MANIFEST);
    let text = std::fs::read_to_string(&manifest).expect("read");
    let old: serde_json::Value = serde_json::from_str(&text).expect("json");
    let edited = text
        .replace(
            old["sha256"].as_str().expect("sha256"),
            &hex::encode(Sha256::digest(bytes)),
        )
        .replace(
            &format!("\"size\": {},", old["size"]),
            &format!("\"size\": {},", bytes.len()),
        );
    assert_ne!(edited, text);
    std::fs::remove_file(&manifest).expect("rm manifest");
    std::fs::write(&manifest, edited).expect("write manifest");
    std::fs::set_permissions(&manifest, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let payload = bundle.join(PAYLOAD);
    std::fs::remove_file(&payload).expect("rm payload");
    std::fs::write(&payload, bytes).expect("write payload");
    std::fs::set_permissions(&payload, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

// See: issue 8, finding 10 (a replaced payload with a rewritten sha256/size stayed `ready`).
#[test]
fn issue_8_a_consistently_replaced_payload_is_corrupt() {
    let f = fixture();
    let created = f
        .create(&request("att-1", KEY), b"the real invoice")
        .expect("create");
    let id = created.manifest.id;
    replace_payload_consistently(&f.bundle(&id), b"#!/bin/sh\necho forged\n");
    // The edited manifest is still well-formed and canonical: only the seal gives it away.
    let bytes = std::fs::read(f.bundle(&id).join(MANIFEST)).expect("read");
    let parsed = Manifest::parse(&bytes).expect("still a well-formed manifest");
    assert_eq!(parsed.size, 22);
    assert_eq!(
        f.store.get(&id),
        Err(HandoffError::Corrupt(
            "the manifest's MAC does not match the store key (edited or forged)"
        ))
    );
    assert!(matches!(
        f.store.read_payload(&id),
        Err(HandoffError::Corrupt(_))
    ));
    assert!(matches!(
        f.store.find_by_key(&request("att-1", KEY)),
        Ok(None)
    ));
    let scan = f.store.scan().expect("scan");
    assert!(
        matches!(scan.as_slice(), [(_, Entry::Corrupt(_))]),
        "{scan:?}"
    );
    // Every sealed field is bound, so moving the expiry or the mailbox fails the same way.
    for (from, to) in [
        ("2026", "2099"),
        (
            "\"sourceAlias\": \"finance\"",
            "\"sourceAlias\": \"personal\"",
        ),
    ] {
        let f = fixture();
        let created = f.create(&request("att-1", KEY), b"x").expect("create");
        let manifest = f.bundle(&created.manifest.id).join(MANIFEST);
        let text = std::fs::read_to_string(&manifest).expect("read");
        let text = if from == "2026" {
            let year = created.manifest.created_at.format("%Y").to_string();
            text.replacen(
                &format!("\"createdAt\": \"{year}"),
                "\"createdAt\": \"2099",
                1,
            )
        } else {
            text.replacen(from, to, 1)
        };
        std::fs::write(&manifest, text).expect("write");
        assert!(
            matches!(
                f.store.get(&created.manifest.id),
                Err(HandoffError::Corrupt(_))
            ),
            "{to}"
        );
    }
}

/// A bundle written before manifests were sealed (version 1, no `mac`) is not served and not
/// re-sealed: nothing proves it was not edited before the upgrade.
#[test]
fn a_version_1_bundle_reads_as_corrupt() {
    let f = fixture();
    let created = f.create(&request("att-1", KEY), b"old").expect("create");
    let manifest = f.bundle(&created.manifest.id).join(MANIFEST);
    let text = std::fs::read_to_string(&manifest).expect("read");
    let at = text.find(",\n  \"mac\": ").expect("mac line");
    let v1 = format!("{}\n}}\n", &text[..at]).replace("\"version\": 2", "\"version\": 1");
    std::fs::write(&manifest, v1).expect("write");
    let refused = f.store.get(&created.manifest.id);
    assert!(
        matches!(refused, Err(HandoffError::Corrupt(why)) if why.contains("another version")),
        "{refused:?}"
    );
}

// See: issue 8, finding 10. The seal is only as good as the key's privacy: a key that is gone,
// replaced or not private is never worked around.
#[test]
fn issue_8_a_bundle_is_not_served_when_the_key_is_missing_or_replaced() {
    let f = fixture();
    let created = f
        .create(&request("att-1", KEY), b"payload")
        .expect("create");
    let id = created.manifest.id.clone();
    let key_path = f.root().join(KEY_FILE);
    let secret = std::fs::read(&key_path).expect("key");
    assert_eq!(secret.len(), key::KEY_LEN);
    assert_eq!(mode(&key_path), 0o600);
    assert!(
        !f.bundle(&id).join(KEY_FILE).exists(),
        "never inside a bundle"
    );
    let reopen = || HandoffStore::new(open_root(f.tmp.path()), limits(), None);
    let existing = || HandoffStore::open_existing(open_root(f.tmp.path()), limits());
    assert_eq!(
        reopen().expect("store").get(&id),
        Ok(created.manifest.clone())
    );
    assert_eq!(
        existing().expect("store").get(&id),
        Ok(created.manifest.clone())
    );

    // Replaced by another private key: nothing verifies.
    let mut other = secret.clone();
    other[0] ^= 1;
    std::fs::write(&key_path, &other).expect("replace key");
    for store in [reopen().expect("store"), existing().expect("store")] {
        assert!(matches!(store.get(&id), Err(HandoffError::Corrupt(_))));
        assert!(matches!(
            store.read_payload(&id),
            Err(HandoffError::Corrupt(_))
        ));
    }

    // Missing: the CLI creates nothing and serves nothing; the server makes a new key, under
    // which the old bundle does not verify either.
    std::fs::remove_file(&key_path).expect("rm key");
    let cli = existing().expect("store");
    assert_eq!(
        cli.get(&id),
        Err(HandoffError::Corrupt(
            "the handoff store has no key (.key), so no bundle can be verified"
        ))
    );
    assert!(matches!(
        cli.create(
            &request("att-2", &key(1)),
            SafeFileName::from_untrusted("x.pdf"),
            "application/pdf",
            b"x"
        ),
        Err(HandoffError::Corrupt(_))
    ));
    assert!(!key_path.exists(), "the CLI never creates the key");
    let server = reopen().expect("store");
    assert!(key_path.exists());
    assert_ne!(std::fs::read(&key_path).expect("key"), secret);
    assert!(matches!(server.get(&id), Err(HandoffError::Corrupt(_))));

    // Not private, not a regular file, the wrong size: the store is refused outright.
    type Spoil = fn(&Path);
    let spoils: [(&str, Spoil); 5] = [
        ("0644", |k| {
            std::fs::set_permissions(k, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        }),
        ("short", |k| {
            std::fs::write(k, b"short").expect("write");
        }),
        ("symlink", |k| {
            let real = k.with_file_name("real-key");
            std::fs::rename(k, &real).expect("mv");
            std::os::unix::fs::symlink(&real, k).expect("symlink");
        }),
        ("hard link", |k| {
            std::fs::hard_link(k, k.with_file_name("second-name")).expect("link");
        }),
        ("directory", |k| {
            std::fs::remove_file(k).expect("rm");
            private_dir(k);
        }),
    ];
    for (what, spoil) in spoils {
        let f = fixture();
        let key_path = f.root().join(KEY_FILE);
        spoil(&key_path);
        for refused in [
            HandoffStore::new(open_root(f.tmp.path()), limits(), None).err(),
            HandoffStore::open_existing(open_root(f.tmp.path()), limits()).err(),
        ] {
            assert!(
                matches!(refused, Some(OpenError::Key(KeyError::NotPrivate))),
                "{what}: {refused:?}"
            );
        }
    }
}

/// Processes opening a fresh root at once agree on one key (created under the store lock).
#[test]
fn concurrent_opens_create_one_key() {
    let tmp = private_tempdir();
    let _ = open_root(tmp.path());
    let path = tmp.path().to_path_buf();
    let stores: Vec<HandoffStore> = (0..8)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || {
                HandoffStore::new(open_root(&path), limits(), None).expect("store")
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().expect("thread"))
        .collect();
    let created = stores[0]
        .create(
            &request("att-1", KEY),
            SafeFileName::from_untrusted("a.pdf"),
            "application/pdf",
            b"shared",
        )
        .expect("create");
    for store in &stores {
        assert_eq!(
            store.get(&created.manifest.id),
            Ok(created.manifest.clone())
        );
    }
    assert!(!tmp.path().join("handoffs").join(KEY_TMP).exists());
}

#[test]
fn a_bundle_without_a_manifest_does_not_exist_for_readers() {
    let f = fixture();
    let created = f
        .create(&request("att-1", KEY), b"payload")
        .expect("create");
    let id = created.manifest.id;
    std::fs::remove_file(f.bundle(&id).join(MANIFEST)).expect("rm");
    assert_eq!(f.store.get(&id), Err(HandoffError::NotFound));
    assert_eq!(f.store.find_by_key(&request("att-1", KEY)), Ok(None));
    let unknown = HandoffId::random();
    assert_eq!(f.store.get(&unknown), Err(HandoffError::NotFound));
}

#[test]
fn a_symlinked_bundle_or_a_file_under_a_bundle_name_is_corrupt() {
    let f = fixture();
    let created = f
        .create(&request("att-1", KEY), b"payload")
        .expect("create");
    let real = f.bundle(&created.manifest.id);
    let outside = f.tmp.path().join("outside");
    std::fs::rename(&real, &outside).expect("move out");
    std::os::unix::fs::symlink(&outside, &real).expect("symlink");
    assert!(matches!(
        f.store.get(&created.manifest.id),
        Err(HandoffError::Corrupt(_))
    ));
    let planted = HandoffId::random();
    std::fs::write(f.bundle(&planted), b"x").expect("plant");
    assert!(matches!(
        f.store.get(&planted),
        Err(HandoffError::Corrupt(_))
    ));
}

#[test]
fn quotas_hold_sequentially() {
    let f = fixture_with(StoreLimits {
        max_entries: 3,
        ..limits()
    });
    for n in 0..3 {
        f.create(&request("att-1", &key(n)), b"x")
            .expect("within quota");
    }
    assert_eq!(
        f.create(&request("att-1", &key(9)), b"x")
            .map(|c| c.replayed),
        Err(HandoffError::QuotaExceeded(Quota::StoreEntries))
    );
    assert_eq!(f.names().len(), 3);

    let f = fixture_with(StoreLimits {
        max_store_bytes: 2048,
        ..limits()
    });
    let kib = vec![7u8; 1024];
    f.create(&request("att-1", &key(0)), &kib)
        .expect("first KiB");
    f.create(&request("att-1", &key(1)), &kib)
        .expect("second KiB");
    assert_eq!(
        f.create(&request("att-1", &key(2)), b"x")
            .map(|c| c.replayed),
        Err(HandoffError::QuotaExceeded(Quota::StoreBytes))
    );
    assert_eq!(
        f.create(&request("att-1", &key(3)), &vec![0u8; 1025])
            .map(|c| c.replayed),
        Err(HandoffError::QuotaExceeded(Quota::AttachmentBytes))
    );
    assert_eq!(f.names().len(), 2, "refused creates leave nothing");
}

#[test]
fn concurrent_creates_never_overshoot_a_quota() {
    let tmp = private_tempdir();
    let limits = StoreLimits {
        max_entries: 5,
        max_store_bytes: 1 << 20,
        ..limits()
    };
    // Separate stores over one root: as separate processes would, they share only the lock.
    let stores: Vec<Arc<HandoffStore>> = (0..16)
        .map(|_| Arc::new(HandoffStore::new(open_root(tmp.path()), limits, None).expect("store")))
        .collect();
    let outcomes: Vec<Result<Created, HandoffError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(n, store)| {
                scope.spawn(move || {
                    store.create(
                        &request("att-1", &key(n)),
                        SafeFileName::from_untrusted("a.bin"),
                        "application/octet-stream",
                        b"payload",
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    let ok = outcomes.iter().filter(|o| o.is_ok()).count();
    assert_eq!(ok, 5, "{outcomes:?}");
    for outcome in outcomes.iter().filter_map(|o| o.as_ref().err()) {
        assert_eq!(
            *outcome,
            HandoffError::QuotaExceeded(Quota::StoreEntries),
            "{outcomes:?}"
        );
    }
    let scan = stores[0].scan().expect("scan");
    assert_eq!(scan.len(), 5, "no uncommitted leftovers: {scan:?}");
    assert!(scan.iter().all(|(_, e)| matches!(e, Entry::Committed(_))));
}

#[test]
fn concurrent_creates_with_one_key_commit_once() {
    let tmp = private_tempdir();
    let stores: Vec<HandoffStore> = (0..16)
        .map(|_| HandoffStore::new(open_root(tmp.path()), limits(), None).expect("store"))
        .collect();
    let ids: Vec<HandoffId> = std::thread::scope(|scope| {
        let handles: Vec<_> = stores
            .iter()
            .map(|store| {
                scope.spawn(move || {
                    store
                        .create(
                            &request("att-1", KEY),
                            SafeFileName::from_untrusted("a.bin"),
                            "application/octet-stream",
                            b"payload",
                        )
                        .expect("create or replay")
                        .manifest
                        .id
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    assert!(ids.iter().all(|id| *id == ids[0]));
    assert_eq!(stores[0].scan().expect("scan").len(), 1);
}

#[test]
fn corrupt_and_foreign_entries_neither_count_nor_block() {
    let f = fixture_with(StoreLimits {
        max_entries: 1,
        ..limits()
    });
    let created = f.create(&request("att-1", &key(0)), b"x").expect("create");
    std::fs::write(f.bundle(&created.manifest.id).join(MANIFEST), b"{}").expect("corrupt");
    std::fs::write(f.root().join("stray.txt"), b"x").expect("foreign");
    std::fs::create_dir(f.root().join("not-a-bundle")).expect("foreign dir");
    f.create(&request("att-1", &key(1)), b"y")
        .expect("a corrupt entry does not use the only slot");
}

#[test]
fn the_sweep_removes_only_abandoned_and_expired_bundles() {
    let f = fixture();
    let kept = f
        .create(&request("att-1", &key(0)), b"keep")
        .expect("create");

    // Abandoned: payload, no manifest, nobody holds the lock (a crashed writer).
    let abandoned = HandoffId::random();
    private_dir(&f.bundle(&abandoned));
    std::fs::write(f.bundle(&abandoned).join(PAYLOAD), b"half").expect("payload");
    std::fs::write(f.bundle(&abandoned).join(MANIFEST_TMP), b"{\"ver").expect("temp");
    // In progress: a live writer holds the bundle lock.
    let busy = HandoffId::random();
    private_dir(&f.bundle(&busy));
    let held = std::fs::File::open(f.bundle(&busy)).expect("open");
    held.try_lock().expect("lock");
    // Unexpected content in an uncommitted bundle is not ours to delete.
    let odd = HandoffId::random();
    private_dir(&f.bundle(&odd));
    std::fs::write(f.bundle(&odd).join("sentinel"), b"x").expect("sentinel");
    std::fs::write(f.root().join("foreign"), b"x").expect("foreign");

    let report = f.store.sweep().expect("sweep");
    assert_eq!(
        report,
        SweepReport {
            expired_removed: 0,
            uncommitted_removed: 1,
            in_progress: 1,
            left_in_place: 2,
        }
    );
    assert!(!f.bundle(&abandoned).exists());
    assert!(f.bundle(&busy).exists());
    assert!(f.bundle(&odd).join("sentinel").exists());
    assert!(f.root().join("foreign").exists());
    assert_eq!(f.store.get(&kept.manifest.id), Ok(kept.manifest.clone()));
    drop(held);
    assert_eq!(f.store.sweep().expect("sweep").uncommitted_removed, 1);

    // With a zero TTL every committed bundle is past its life.
    let expired = HandoffStore::new(
        open_root(f.tmp.path()),
        StoreLimits {
            ttl: Duration::ZERO,
            ..limits()
        },
        None,
    )
    .expect("store");
    assert_eq!(expired.get(&kept.manifest.id), Err(HandoffError::Expired));
    assert_eq!(expired.find_by_key(&request("att-1", &key(0))), Ok(None));
    assert_eq!(expired.sweep().expect("sweep").expired_removed, 1);
    assert!(!f.bundle(&kept.manifest.id).exists());
}

#[test]
fn remove_deletes_a_bundle_and_nothing_else() {
    let f = fixture();
    let created = f.create(&request("att-1", KEY), b"bytes").expect("create");
    let id = created.manifest.id;
    f.store.remove(&id).expect("remove");
    assert_eq!(f.store.get(&id), Err(HandoffError::NotFound));
    assert_eq!(f.store.remove(&id), Err(HandoffError::NotFound));
    assert!(f.names().is_empty());

    let created = f
        .create(&request("att-1", &key(1)), b"bytes")
        .expect("create");
    let bundle = f.bundle(&created.manifest.id);
    std::fs::write(bundle.join("sentinel"), b"x").expect("sentinel");
    assert!(matches!(
        f.store.remove(&created.manifest.id),
        Err(HandoffError::Corrupt(_))
    ));
    assert!(bundle.join("sentinel").exists(), "foreign files survive");
}

#[test]
fn the_root_must_be_private() {
    let tmp = private_tempdir();
    let root = open_root(tmp.path());
    std::fs::set_permissions(
        tmp.path().join("handoffs"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    assert!(matches!(
        HandoffStore::new(root, limits(), None),
        Err(OpenError::NotPrivate)
    ));
    // A symlinked root is refused by path_guard before a store exists.
    let other = private_tempdir();
    std::fs::create_dir(other.path().join("real")).expect("mkdir");
    std::os::unix::fs::symlink(other.path().join("real"), other.path().join("handoffs"))
        .expect("symlink");
    assert_eq!(
        crate::path_guard::open_private_subdir(other.path(), "handoffs", false).err(),
        Some(crate::path_guard::PrivateDirError::NotADirectory)
    );
    // Without `create`, a missing root is reported and nothing is made.
    let empty = private_tempdir();
    assert_eq!(
        crate::path_guard::open_private_subdir(empty.path(), "handoffs", false).err(),
        Some(crate::path_guard::PrivateDirError::Missing)
    );
    assert!(!empty.path().join("handoffs").exists());
}

/// The handoff store's timings (formerly `cargo bench --bench handoff`, issue 28 moved them out
/// of the shipped crate): create at 1 KiB / 1 MiB / 25 MiB with full revalidation, then create,
/// replay lookup and the startup sweep at a store of many bundles, because every create scans the
/// committed manifests (quota accounting and the key lookup). Timings depend on the machine, so
/// the full run is an ignored test that prints its report and asserts nothing about speed:
/// `cargo test --release --lib handoff -- --ignored --nocapture` (bundles:
/// `MAILGATE_HANDOFF_BENCH_ENTRIES`, default 1000). The suite runs it once on a small store, so a
/// broken measurement fails there rather than on the day someone wants the figures.
mod measurement {
    use std::fmt::Write as _;
    use std::time::Instant;

    use super::*;
    use crate::downloads::SafeFileName;

    const MIB: usize = 1024 * 1024;

    fn request(n: usize) -> HandoffRequest {
        HandoffRequest::new(
            Alias::parse("bench").expect("a valid alias"),
            "message",
            "att-0",
            &format!("0f8fad5b-d9cb-469f-a165-{n:012}"),
        )
    }

    fn time<T>(f: impl FnOnce() -> T) -> (T, Duration) {
        let started = Instant::now();
        let out = f();
        (out, started.elapsed())
    }

    /// Runs the measurements at `entries` bundles in a fresh private scratch directory and
    /// returns the report, one line per figure.
    fn run(entries: usize) -> String {
        let scratch = private_tempdir();
        let root = crate::path_guard::open_private_subdir(scratch.path(), "handoffs", true)
            .expect("open the store root");
        let store = HandoffStore::new(
            root,
            StoreLimits {
                max_attachment_bytes: 100 * MIB as u64,
                max_store_bytes: 5 * 1024 * MIB as u64,
                max_entries: 10_000,
                ttl: Duration::from_secs(3600),
            },
            None,
        )
        .expect("open the store");
        let name = || SafeFileName::from_untrusted("bench.bin");
        let mut report = String::new();
        let mut next = 0usize;
        let mut create = |bytes: &[u8]| {
            next += 1;
            store
                .create(&request(next), name(), "application/octet-stream", bytes)
                .expect("create a bundle")
        };

        for size in [1024, MIB, 25 * MIB] {
            let bytes = vec![0x5a_u8; size];
            let (created, took) = time(|| create(&bytes));
            let id = created.manifest.id;
            let (got, verify) = time(|| store.get(&id));
            got.expect("revalidate the bundle");
            let _ = writeln!(
                report,
                "create {:>9} B into a near-empty store: {:>8.2} ms; full revalidation: {:>8.2} ms",
                size,
                took.as_secs_f64() * 1e3,
                verify.as_secs_f64() * 1e3
            );
        }
        let small = vec![1u8; 1024];
        let ((), fill) = time(|| {
            for _ in 3..entries {
                create(&small);
            }
        });
        let _ = writeln!(
            report,
            "filled the store to {entries} bundles in {:.2} s ({:.2} ms per create on average)",
            fill.as_secs_f64(),
            fill.as_secs_f64() * 1e3 / entries.saturating_sub(3).max(1) as f64
        );
        let (_, took) = time(|| create(&small));
        let _ = writeln!(
            report,
            "create 1 KiB at {} bundles: {:.2} ms",
            entries + 1,
            took.as_secs_f64() * 1e3
        );
        let (found, lookup) = time(|| store.find_by_key(&request(next)));
        assert!(
            found.expect("look the last bundle up").is_some(),
            "the replay lookup finds the last bundle"
        );
        let _ = writeln!(
            report,
            "replay lookup by key at {} bundles: {:.2} ms",
            entries + 1,
            lookup.as_secs_f64() * 1e3
        );
        let (swept, sweep) = time(|| store.sweep());
        swept.expect("sweep the store");
        let _ = writeln!(
            report,
            "startup sweep over {} bundles: {:.2} ms",
            entries + 1,
            sweep.as_secs_f64() * 1e3
        );
        report
    }

    #[test]
    fn the_measurement_runs_on_a_small_store() {
        let report = run(8);
        assert_eq!(report.lines().count(), 7, "{report}");
        assert!(report.contains("startup sweep over 9 bundles"), "{report}");
    }

    #[test]
    #[ignore = "gh28: a measurement, not a check; prints the handoff store's timings"]
    #[expect(
        clippy::print_stdout,
        reason = "the measurement's output is its report"
    )]
    fn handoff_store_timings() {
        let entries = std::env::var("MAILGATE_HANDOFF_BENCH_ENTRIES")
            .ok()
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(1000);
        print!("{}", run(entries));
    }
}
