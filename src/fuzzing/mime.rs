//! Fuzz entry points of the MIME view: untrusted RFC 5322 bytes through `mime` in memory
//! (`mime_memory`) and delivered into a Maildir and read back through the backend
//! (`mime_maildir`), each with its oracle. Compiled only under `cfg(fuzzing)`.

use std::path::Path;

use super::{KIB, contain_mail_parser_panics, runtime};
use crate::backends::maildir::MaildirStore;
use crate::backends::model::{Budget, Filters, FolderSelector, Order, ScanRequest};
use crate::backends::{BackendError, MailStore};

// ----------------------------------------------------------------------------------------------
// mime_maildir
// ----------------------------------------------------------------------------------------------

/// The one message file's name: delivered at 2026-01-01T00:00:00Z, flag `S` (seen).
const MESSAGE_FILE: &str = "1767225600.M1P1.fuzz:2,S";
const MESSAGE_RECEIVED: i64 = 1_767_225_600;
/// Attachments beyond this many are only checked by `mime::fuzz_parse` (each backend fetch
/// re-parses the message, so checking all of them would make the target quadratic).
const MAX_CHECKED_ATTACHMENTS: usize = 16;
/// The per-attachment cap used for fetches: the default `maxRawAttachmentBytes`.
const ATTACHMENT_CAP: u64 = 256 * KIB;

/// Fuzzes MIME parsing through the real Maildir backend: `data` becomes the only message of a
/// Maildir under `scratch` (rewritten on every call), which is then read back through
/// [`MaildirStore`] exactly as the tools do, plus [`crate::mime::fuzz_parse`] on the raw bytes.
///
/// `scratch` must be a private, writable directory that nothing else uses (the fuzz target
/// passes a temporary directory); only `scratch/maildir/` is written.
///
/// Oracles: the folder list is exactly the inbox with one seen message; a scan lists the message
/// exactly once, also when filtered by its own sender, subject, date, flags and attachment state
/// and when searched for words of its own subject, and never when filtered by the opposite
/// attachment state; `get_message` succeeds and agrees with the scan; `list_attachments` agrees
/// with the scan; each attachment fetch returns exactly its listed size when the size is within
/// the cap and `TooLarge` when it is not (the first one also with a cap one byte below its
/// size); an id past the end is `NotFound`. mime's own oracles
/// (attachment sizes, determinism, bounded and script-free HTML text) run on the raw bytes.
pub fn mime_maildir(scratch: &Path, data: &[u8]) {
    mime_maildir_inner(scratch, data);
}

/// Raw message bytes → the MIME view, in memory (thousands of inputs per second, where the
/// Maildir target manages tens), for the hostile-shape class of issue 8 (nesting depth, part
/// count, header size). Oracles, beyond "no panic":
/// * the parse runs on a thread with a server worker's stack (2 MiB): unbounded recursion
///   aborts the process (a crash for libFuzzer), as it would abort the server;
/// * output size: every header string ≤ `MAX_HEADER_CHARS`, the body ≤ `MAX_BODY_CHARS`, at
///   most `MAX_PARTS` attachments and `MAX_ADDRESSES` per address list, and all text together
///   at most 4 bytes per input byte plus 64 KiB (decoding may widen a byte, never multiply it);
/// * time: one parse takes at most 1 s plus 20 µs per input byte (a quadratic shape of a
///   100 KB input blows through this; libFuzzer's -timeout catches the hangs);
/// * a view with attachments beyond the parser's part limit is marked as cut;
/// * mime's own oracles (attachment sizes, determinism, bounded script-free HTML).
pub fn mime_memory(data: &[u8]) {
    contain_mail_parser_panics();
    let input = data.to_vec();
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || check_mime_view(&input))
        .expect("invariant: a parse thread can be spawned")
        .join()
        .expect("oracle: the parse thread does not panic");
}

fn check_mime_view(data: &[u8]) {
    use crate::mime::{MAX_ADDRESSES, MAX_BODY_CHARS, MAX_HEADER_CHARS, MAX_REFERENCES};
    use mail_parser::parsers::message::MAX_PARTS;

    let started = std::time::Instant::now();
    let m = crate::mime::parse(data);
    let budget = std::time::Duration::from_secs(1)
        + std::time::Duration::from_micros(20).saturating_mul(data.len() as u32);
    assert!(
        started.elapsed() <= budget,
        "oracle: parse time {:?} over {budget:?} for {} bytes",
        started.elapsed(),
        data.len()
    );

    let header_strings = m
        .message_id
        .iter()
        .chain(&m.in_reply_to)
        .chain(&m.subject)
        .chain(&m.references)
        .chain(
            m.from
                .iter()
                .chain(&m.to)
                .chain(&m.cc)
                .flat_map(|b| b.name.iter().chain(&b.address)),
        )
        .chain(m.attachments.iter().flat_map(|a| &a.name));
    let mut text_bytes = m.body_text.len();
    for h in header_strings {
        assert!(
            h.chars().count() <= MAX_HEADER_CHARS,
            "oracle: header string bounded"
        );
        text_bytes += h.len();
    }
    text_bytes += m
        .attachments
        .iter()
        .map(|a| a.content_type.len())
        .sum::<usize>();
    assert!(
        m.body_text.chars().count() <= MAX_BODY_CHARS,
        "oracle: body bounded"
    );
    assert!(
        m.attachments.len() <= MAX_PARTS,
        "oracle: part count bounded"
    );
    for list in [&m.from, &m.to, &m.cc] {
        assert!(list.len() <= MAX_ADDRESSES, "oracle: address list bounded");
    }
    assert!(
        m.references.len() <= MAX_REFERENCES,
        "oracle: references bounded"
    );
    assert!(
        text_bytes <= 4 * data.len() + (64 << 10),
        "oracle: view of {text_bytes} bytes from {} input bytes",
        data.len()
    );
    if m.attachments.len() + 1 >= MAX_PARTS {
        assert!(
            m.cuts.structure,
            "oracle: a part-limit stop is marked as cut"
        );
    }
    crate::mime::fuzz_parse(data);
}

fn mime_maildir_inner(scratch: &Path, data: &[u8]) {
    contain_mail_parser_panics();
    crate::mime::fuzz_parse(data);

    let root = cap_std::fs::Dir::open_ambient_dir(scratch, cap_std::ambient_authority())
        .expect("invariant: the scratch directory opens");
    for sub in ["maildir/cur", "maildir/new", "maildir/tmp"] {
        root.create_dir_all(sub)
            .expect("invariant: the scratch Maildir can be created");
    }
    let maildir = root
        .open_dir("maildir")
        .expect("invariant: the scratch Maildir opens");
    maildir
        .write(format!("cur/{MESSAGE_FILE}"), data)
        .expect("invariant: the message file can be written");

    let store = MaildirStore::new(maildir);
    runtime().block_on(check_maildir(&store));
}

async fn check_maildir(store: &MaildirStore) {
    let folders = store
        .list_folders()
        .await
        .expect("oracle: list_folders succeeds");
    assert_eq!(folders.len(), 1, "oracle: only the inbox exists");
    assert_eq!(folders[0].id, "INBOX", "oracle: the folder is the inbox");
    assert_eq!(folders[0].total, 1, "oracle: the inbox holds one message");
    assert_eq!(folders[0].unread, 0, "oracle: the message is seen (flag S)");

    let request = |filters: Filters| ScanRequest {
        folder: FolderSelector::parse(None),
        filters,
        budget: Budget {
            deadline: std::time::Instant::now() + crate::search::SEARCH_DEADLINE,
            max_pages: 2,
            max_items: 10,
        },
        keep: 10,
        order: Order::default(),
    };
    let page = store
        .scan(&request(Filters::default()), None)
        .await
        .expect("oracle: a scan succeeds");
    assert_eq!(
        page.items.len(),
        1,
        "oracle: the message is listed exactly once"
    );
    assert!(
        !page.truncated,
        "oracle: one message never truncates a scan"
    );
    let listed = &page.items[0];
    assert!(listed.is_read, "oracle: flag S reads as read");
    assert_eq!(
        listed.received.map(|d| d.timestamp()),
        Some(MESSAGE_RECEIVED),
        "oracle: received is the delivery time in the file name"
    );

    // Filtered by its own properties the message is still found; by the opposite, it is not.
    let own = Filters {
        sender: listed
            .from
            .as_ref()
            .and_then(|m| m.address.clone().or_else(|| m.name.clone())),
        subject: listed.subject.clone(),
        date_from: listed.received,
        date_to: listed.received,
        has_attachments: Some(listed.has_attachments),
        is_read: Some(true),
        // A Maildir message carries none.
        categories: Vec::new(),
    };
    let found = store
        .scan(&request(own), None)
        .await
        .expect("oracle: a filtered scan succeeds");
    assert_eq!(
        found.items.len(),
        1,
        "oracle: filters built from the message match it"
    );
    let opposite = Filters {
        has_attachments: Some(!listed.has_attachments),
        ..Filters::default()
    };
    let none = store
        .scan(&request(opposite), None)
        .await
        .expect("oracle: a filtered scan succeeds");
    assert!(
        none.items.is_empty(),
        "oracle: the opposite attachment filter excludes the message"
    );
    if let Some(subject) = &listed.subject
        && !crate::text::query_tokens(subject).is_empty()
    {
        let hits = store
            .scan(&request(Filters::default()), Some(subject))
            .await
            .expect("oracle: a search succeeds");
        assert_eq!(
            hits.items.len(),
            1,
            "oracle: searching for the subject's words finds the message"
        );
    }

    let detail = store
        .get_message(&listed.id)
        .await
        .expect("oracle: get_message succeeds for a listed id");
    assert_eq!(
        detail.summary.id, listed.id,
        "oracle: get_message keeps the id"
    );
    assert_eq!(
        detail.summary.subject, listed.subject,
        "oracle: get_message and the scan agree on the subject"
    );
    assert_eq!(
        detail.summary.from, listed.from,
        "oracle: get_message and the scan agree on the sender"
    );

    let metas = store
        .list_attachments(&listed.id)
        .await
        .expect("oracle: list_attachments succeeds for a listed id");
    assert_eq!(
        metas.len(),
        listed.attachments.len(),
        "oracle: list_attachments and the scan agree"
    );
    for (index, meta) in metas.iter().enumerate().take(MAX_CHECKED_ATTACHMENTS) {
        assert_eq!(
            meta.id,
            format!("att-{index}"),
            "oracle: attachment ids are att-<position>"
        );
        assert_eq!(
            meta.size, listed.attachments[index].size,
            "oracle: list_attachments and the scan agree on sizes"
        );
        match store.attachment(&listed.id, &meta.id, ATTACHMENT_CAP).await {
            Ok((fetched, bytes)) => {
                assert!(
                    meta.size <= ATTACHMENT_CAP,
                    "oracle: over the cap is TooLarge"
                );
                assert_eq!(
                    bytes.len() as u64,
                    meta.size,
                    "oracle: the decoded length is the listed size"
                );
                assert_eq!(fetched.size, meta.size, "oracle: the fetched meta agrees");
            }
            Err(BackendError::TooLarge) => assert!(
                meta.size > ATTACHMENT_CAP,
                "oracle: TooLarge only over the cap (listed size {}, the decoded length differs)",
                meta.size
            ),
            Err(error) => panic!("oracle: a listed attachment can be fetched: {error:?}"),
        }
        // The refusal below the size needs one more parse; probing the first attachment is
        // enough to cover the declared-size check.
        if index == 0 && meta.size > 0 {
            assert!(
                matches!(
                    store.attachment(&listed.id, &meta.id, meta.size - 1).await,
                    Err(BackendError::TooLarge)
                ),
                "oracle: a cap one below the size is TooLarge"
            );
        }
    }
    let past_end = format!("att-{}", metas.len());
    assert!(
        matches!(
            store
                .attachment(&listed.id, &past_end, ATTACHMENT_CAP)
                .await,
            Err(BackendError::NotFound)
        ),
        "oracle: an attachment id past the end is NotFound"
    );
}
