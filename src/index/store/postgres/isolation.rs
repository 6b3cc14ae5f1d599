//! Isolation without row-level security (test builds only). Three Maildir mailboxes are synced
//! through the store into one database as the test server's superuser, whom row security does
//! not bind, with the role check off ([`super::RoleCheck::Off`]): only the statements' own
//! mailbox conditions keep each mailbox to its rows. Two of them hold a message under the same
//! folder and id. Every sync must remove nothing of another mailbox (the bug this guards
//! against: a second mailbox's sync took the first one's versions for its own and removed its
//! messages, and a third's found two cursors of one folder), every read and status must see its
//! own mailbox only, and a vector model change, a pause and a purge must touch one mailbox. The
//! message of that shared id is a long log in both, so its body's tokens fill chunk rows
//! (`mailgate_body_lexemes`) under one key in two mailboxes.
//! With the check on, the same superuser is refused before anything is read.

use std::time::Duration;

use cap_std::fs::Dir;

use super::read::PgRead;
use super::role::{PER_MAILBOX_TABLES, Refusal};
use super::testdb::{Superuser, fresh_as_superuser};
use super::{PgError, PgSettings, RoleCheck, admin};
use crate::backends::Backend;
use crate::backends::maildir::MaildirStore;
use crate::backends::model::Filters;
use crate::embed::vectors::SyncVectors as _;
use crate::index::store::{Nearest, Opened, WriteStore};
use crate::index::sync::{Progress, SyncOptions, SyncReport, sync_alias};
use crate::index::{CandidateQuery, Clue, IndexError, IndexQuery};

const A: &str = "sha256:isolation-a";
const B: &str = "sha256:isolation-b";
const C: &str = "sha256:isolation-c";

/// The Maildir file name both A and B hold in their inbox: one id in two mailboxes.
const SHARED: &str = "1767225600.M1P1.shared";

/// One message: the subject and body both carry `word`.
fn mail(word: &str, n: usize) -> Vec<u8> {
    format!(
        "From: Ana Lima <ana.lima@example.com>\r\nTo: team@example.org\r\n\
         Subject: {word} report {n}\r\nMessage-ID: <{word}-{n}@example.com>\r\n\
         Date: Mon, 05 Jan 2026 10:{n:02}:00 +0000\r\n\r\nThe {word} figures, part {n}.\r\n"
    )
    .into_bytes()
}

/// Message 0 as a long log: more distinct ids than one `tsvector` holds, and last (in byte
/// order) its tail word ([`tail`]), which lands in a chunk row.
fn long_mail(word: &str) -> Vec<u8> {
    let mut raw = String::from_utf8(mail(word, 0)).expect("text");
    for i in 0..110_000 {
        raw.push_str(&format!("k{i} "));
        if i % 10 == 9 {
            raw.push_str("\r\n");
        }
    }
    raw.push_str(&tail(word));
    raw.push_str("\r\n");
    raw.into_bytes()
}

/// The word only `word`'s long log holds, in a chunk of its body.
fn tail(word: &str) -> String {
    format!("zz{word}tail")
}

/// A Maildir whose every message carries `word`: `inbox` messages (the first named [`SHARED`],
/// a long log, when `shared`) and `archive` messages in `.Archive`.
fn maildir(word: &str, inbox: usize, archive: usize, shared: bool) -> (tempfile::TempDir, Dir) {
    let tmp = tempfile::tempdir().expect("a temp folder");
    let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).expect("open it");
    for sub in [
        "cur",
        "new",
        "tmp",
        ".Archive/cur",
        ".Archive/new",
        ".Archive/tmp",
    ] {
        dir.create_dir_all(sub).expect("a Maildir folder");
    }
    for n in 0..inbox {
        let (name, raw) = if n == 0 && shared {
            (SHARED.to_owned(), long_mail(word))
        } else {
            (format!("17672256{n:02}.M{n}P1.{word}"), mail(word, n))
        };
        dir.write(format!("cur/{name}:2,S"), raw)
            .expect("a message");
    }
    for n in 0..archive {
        dir.write(
            format!(".Archive/cur/17672257{n:02}.M{n}P2.{word}:2,S"),
            mail(word, 50 + n),
        )
        .expect("a message");
    }
    (tmp, dir)
}

fn backend(dir: &Dir) -> Backend {
    Backend::Maildir(MaildirStore::new(
        dir.try_clone().expect("clone the folder"),
    ))
}

/// One sync of `mailbox` from `backend` through the shared store, as `index sync` runs it.
async fn sync(settings: &PgSettings, mailbox: &str, backend: &Backend) -> SyncReport {
    let Opened::Ready(mut store) = WriteStore::open_postgres(settings, mailbox, None)
        .await
        .expect("open for a sync")
    else {
        panic!("{mailbox} opens ready");
    };
    let progress = |_: &Progress| {};
    let stop = || false;
    let opts = SyncOptions {
        backend_kind: "maildir",
        mailbox,
        extraction: None,
        semantic: None,
        progress: &progress,
        stop: &stop,
        hold: None,
    };
    let report = sync_alias(&mut store, backend, &opts).await;
    store.close().await;
    report.expect("the sync")
}

/// The rows of `mailbox` in every per-mailbox table, as the superuser counts them.
async fn rows_of(db: &Superuser, mailbox: &str) -> Vec<(&'static str, i64)> {
    let mut out = Vec::new();
    for table in PER_MAILBOX_TABLES {
        let n: i64 = db
            .client
            .query_one(
                &format!("SELECT count(*) FROM {table} WHERE mailbox = $1"),
                &[&mailbox],
            )
            .await
            .expect("count")
            .get(0);
        out.push((table, n));
    }
    out
}

fn words(words: &[&str], folder: Option<&str>) -> IndexQuery {
    IndexQuery {
        folder_id: folder.map(str::to_owned),
        words: words.iter().map(|w| (*w).to_owned()).collect(),
        filters: Filters::default(),
        limit: 100,
        order: None,
    }
}

/// What `read` finds of `word` (its matches), and how many messages its whole index holds.
async fn found(read: &PgRead, word: &str) -> (usize, usize) {
    let hits = read.search(&words(&[word], None)).await.expect("search");
    let all = read.search(&words(&[], None)).await.expect("list");
    assert_eq!(all.matched, all.in_scope, "a listing matches its scope");
    (hits.matched, all.in_scope)
}

/// The nearest passages of `model-1` in `read`'s inbox.
async fn near(read: &PgRead) -> Result<Nearest, IndexError> {
    read.nearest("model-1", &[1.0, 0.1, 0.1, 0.1], 10, "INBOX")
        .await
}

#[tokio::test]
async fn a_role_row_security_does_not_bind_still_touches_one_mailbox() {
    let Some(db) = fresh_as_superuser("isolation", Duration::from_secs(60), RoleCheck::Off).await
    else {
        return;
    };
    let su = &db.settings;
    let (_ta, mail_a) = maildir("aardvark", 4, 2, true);
    let (_tb, mail_b) = maildir("bison", 3, 2, true);
    let (_tc, mail_c) = maildir("caracal", 2, 1, false);
    let (a, b, c) = (backend(&mail_a), backend(&mail_b), backend(&mail_c));

    let first = sync(su, A, &a).await;
    assert_eq!((first.indexed, first.removed), (6, 0), "A's first sync");
    let rows_a = rows_of(&db, A).await;
    assert!(
        rows_a.contains(&("mailgate_body_lexemes", 1)),
        "A's long log fills a chunk: {rows_a:?}"
    );
    let second = sync(su, B, &b).await;
    assert_eq!(
        (second.indexed, second.removed),
        (5, 0),
        "B's first sync neither takes A's messages for its own nor removes them"
    );
    // The third mailbox found two mailboxes' cursors of one folder here (a row count error,
    // reported as a lost connection); it syncs as the others did.
    let third = sync(su, C, &c).await;
    assert_eq!((third.indexed, third.removed), (3, 0), "C's first sync");
    assert!(third.complete);
    assert_eq!(
        rows_of(&db, A).await,
        rows_a,
        "A's rows after B's and C's syncs"
    );
    let rows_c = rows_of(&db, C).await;

    // Every read sees its own mailbox only: its words, its counts, its status, its summary of
    // the id two mailboxes hold.
    let pool = super::pool(su, 2).expect("a pool");
    let read = |m: &str| PgRead::new(pool.clone(), m.to_owned());
    let (ra, rb, rc) = (read(A), read(B), read(C));
    assert_eq!(found(&ra, "aardvark").await, (6, 6));
    assert_eq!(found(&rb, "bison").await, (5, 5));
    assert_eq!(found(&rc, "caracal").await, (3, 3));
    for (r, foreign) in [(&ra, "bison"), (&rb, "aardvark"), (&rc, "aardvark")] {
        assert_eq!(found(r, foreign).await.0, 0, "another mailbox's word");
    }
    // The long logs' tail words, in chunk rows under the id both hold: each in its own.
    assert_eq!(found(&ra, &tail("aardvark")).await.0, 1);
    assert_eq!(found(&rb, &tail("bison")).await.0, 1);
    for (r, foreign) in [(&ra, "bison"), (&rb, "aardvark"), (&rc, "aardvark")] {
        assert_eq!(
            found(r, &tail(foreign)).await.0,
            0,
            "another mailbox's chunk"
        );
    }
    let ranked = rb.search(&words(&["report"], None)).await.expect("search");
    assert_eq!(ranked.matched, 5, "a word of every mailbox: B's messages");
    assert!(
        ranked
            .hits
            .iter()
            .all(|(m, _)| m.subject.as_deref().is_some_and(|s| s.contains("bison"))),
        "{:?}",
        ranked.hits
    );
    let inbox = ra.search(&words(&[], Some("INBOX"))).await.expect("list");
    assert_eq!((inbox.in_scope, inbox.matched), (4, 4), "A's inbox");
    for (r, n) in [(&ra, 6), (&rb, 5), (&rc, 3)] {
        assert_eq!(r.status().await.expect("status").messages(), n);
    }
    let shared = |hits: &crate::index::IndexHits| {
        hits.hits
            .iter()
            .find(|(m, _)| m.subject.as_deref() == Some("bison report 0"))
            .map(|(m, _)| m.id.clone())
            .expect("B's message of the shared file name")
    };
    let shared_id = shared(
        &rb.search(&words(&["bison"], Some("INBOX")))
            .await
            .expect("s"),
    );
    let subject = |s: Option<crate::backends::model::MessageSummary>| s.and_then(|s| s.subject);
    assert_eq!(
        subject(ra.summary(&shared_id).await.expect("summary")).as_deref(),
        Some("aardvark report 0")
    );
    assert_eq!(
        subject(rb.summary(&shared_id).await.expect("summary")).as_deref(),
        Some("bison report 0")
    );
    assert!(rc.summary(&shared_id).await.expect("summary").is_none());
    let in_c = rc
        .summaries_in("INBOX", &[shared_id.as_str()])
        .await
        .expect("summaries");
    assert!(in_c.len() == 1 && in_c[0].is_none());
    let ids = rc
        .message_ids(&[("INBOX", shared_id.as_str())])
        .await
        .expect("ids");
    assert_eq!(ids, [None]);
    let ids = ra
        .message_ids(&[("INBOX", shared_id.as_str())])
        .await
        .expect("ids");
    assert_eq!(ids, [Some("aardvark-0@example.com".to_owned())]);
    let clue = |text: &str| CandidateQuery {
        folder_id: "INBOX".to_owned(),
        clues: vec![Clue::Text(text.to_owned())],
        limit: 100,
    };
    assert_eq!(
        rb.candidates(&clue("aardvark")).await.expect("c").matched,
        0
    );
    assert_eq!(
        ra.candidates(&clue("aardvark")).await.expect("c").matched,
        4
    );
    // A clue whose atoms are split between the long log's row (`k1`) and its chunk.
    let split = format!("{} k1", tail("bison"));
    assert_eq!(rb.candidates(&clue(&split)).await.expect("c").matched, 1);
    assert_eq!(ra.candidates(&clue(&split)).await.expect("c").matched, 0);

    // B loses a message (the one A holds under the same id too) and its archive folder: its
    // sync removes B's, never A's.
    mail_b
        .remove_file(format!("cur/{SHARED}:2,S"))
        .expect("remove B's message");
    mail_b
        .remove_dir_all(".Archive")
        .expect("remove B's folder");
    let again = sync(su, B, &b).await;
    assert_eq!(again.indexed, 0);
    assert_eq!(
        again.removed, 3,
        "B's own three: one message, and its archive's two"
    );
    assert_eq!(rows_of(&db, A).await, rows_a, "A's rows after B's removals");
    assert!(
        rows_of(&db, B)
            .await
            .contains(&("mailgate_body_lexemes", 0)),
        "B's long log took its chunk with it"
    );
    assert_eq!(found(&ra, &tail("aardvark")).await.0, 1, "A's chunk stays");
    assert_eq!(rows_of(&db, C).await, rows_c, "C's rows after B's removals");
    assert_eq!(found(&rb, "bison").await, (2, 2));
    assert_eq!(
        subject(ra.summary(&shared_id).await.expect("summary")).as_deref(),
        Some("aardvark report 0"),
        "A keeps its message of the id B removed"
    );
    let resync = sync(su, A, &a).await;
    assert_eq!(
        (resync.indexed, resync.removed),
        (0, 0),
        "A's state is as its last sync left it"
    );
    assert_eq!(ra.status().await.expect("status").messages(), 6);

    // Vectors: B's change of model drops B's vectors of the old one, never A's.
    let keys = |r: &crate::index::IndexHits| -> Vec<String> {
        r.hits
            .iter()
            .map(|(m, _)| crate::index::doc_key(&m.folder_id, &m.id))
            .collect()
    };
    let of_a = keys(&ra.search(&words(&[], Some("INBOX"))).await.expect("list"));
    let of_b = keys(&rb.search(&words(&[], Some("INBOX"))).await.expect("list"));
    for (mailbox, keys) in [(A, &of_a), (B, &of_b)] {
        let Ok(Opened::Ready(mut writer)) =
            super::write::PgWrite::open(su, mailbox, Some("model-1")).await
        else {
            panic!("{mailbox} opens for its vectors");
        };
        for (n, key) in keys.iter().enumerate() {
            let v: Vec<f32> = (0..4).map(|d| if d == n % 4 { 1.0 } else { 0.1 }).collect();
            writer
                .vectors_mut()
                .expect("vectors")
                .upsert(key, vec![v])
                .expect("upsert");
        }
        writer.commit_vectors().await.expect("commit the vectors");
        writer.close().await;
    }
    let vectors_a = rows_of(&db, A).await;
    let Ok(Opened::Ready(writer)) = super::write::PgWrite::open(su, B, Some("model-2")).await
    else {
        panic!("B opens with another model");
    };
    writer.close().await;
    assert_eq!(
        rows_of(&db, A).await,
        vectors_a,
        "A's vectors after B's model change"
    );
    let Nearest::Found(hits) = near(&ra).await.expect("nearest") else {
        panic!("A holds vectors");
    };
    assert_eq!(hits.len(), of_a.len(), "A's inbox messages, and only those");
    assert_eq!(near(&rb).await.expect("nearest"), Nearest::NotIndexed);
    assert_eq!(near(&rc).await.expect("nearest"), Nearest::NotIndexed);

    // The operator's commands: B paused and purged, A and C as they were.
    admin::set_paused(su, B, true).await.expect("pause");
    assert!(!ra.status().await.expect("status").paused);
    assert!(rb.status().await.expect("status").paused);
    assert_eq!(
        admin::purge(su, B).await.expect("purge"),
        admin::Purged::Removed
    );
    assert_eq!(rows_of(&db, A).await, vectors_a, "A's rows after B's purge");
    assert_eq!(rows_of(&db, C).await, rows_c, "C's rows after B's purge");
    assert!(matches!(rb.status().await, Err(IndexError::Missing)));
}

#[tokio::test]
async fn with_the_check_on_a_superuser_is_refused_before_it_reads_or_writes() {
    let Some(db) = fresh_as_superuser(
        "isolation_refused",
        Duration::from_secs(60),
        RoleCheck::Enforced,
    )
    .await
    else {
        return;
    };
    let refused = |e: &PgError| matches!(e, PgError::Role(Refusal::Superuser));
    let e = super::connect(&db.settings).await.expect_err("refused");
    assert!(refused(&e), "{e}");
    let e = super::checked_pool(&db.settings, 1)
        .await
        .err()
        .expect("refused");
    assert!(refused(&e), "{e}");
    // A pool refuses on each new connection's first use, and never pools the refused one.
    let pool = super::pool(&db.settings, 1).expect("a pool");
    for _ in 0..2 {
        let e = pool.get().await.expect_err("refused");
        assert!(refused(&e), "{e}");
    }
    let e = PgRead::new(pool, A.to_owned())
        .status()
        .await
        .expect_err("refused");
    assert!(e.to_string().contains("is a superuser"), "{e}");
    let Err(e) = WriteStore::open_postgres(&db.settings, A, None).await else {
        panic!("a sync as the superuser is refused");
    };
    assert!(e.to_string().contains("is a superuser"), "{e}");
    let e = admin::set_paused(&db.settings, A, true)
        .await
        .expect_err("refused");
    assert!(e.to_string().contains("is a superuser"), "{e}");
    // Nothing was written; the owning role is let in.
    assert!(rows_of(&db, A).await.iter().all(|(_, n)| *n == 0));
    super::connect(&db.owner).await.expect("the owning role");
    // `index migrate`'s connection is not vetted, and says what its role is.
    let (_client, note) = super::connect_to_migrate(&db.settings)
        .await
        .expect("migrate");
    assert!(note.is_some_and(|n| n.contains("migrated as a superuser")));
    let (_client, note) = super::connect_to_migrate(&db.owner).await.expect("migrate");
    assert_eq!(note, None);
}
