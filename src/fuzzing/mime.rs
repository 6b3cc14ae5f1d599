//! Fuzz entry points of the MIME view: untrusted RFC 5322 bytes through `mime` in memory
//! (`mime_memory`) and delivered into a Maildir and read back through the backend
//! (`mime_maildir`), each with its oracle. Compiled only under `cfg(fuzzing)`.
//!
//! The renderer of HTML bodies gets arbitrary bytes of its own (`html_text`).
//!
//! Speed: what a fuzzer process can set up once, it sets up once — the worker thread of
//! `mime_memory` and `html_text`, the Maildir tree and its store of `mime_maildir` — so that an
//! input costs its parses, not a thread (under AddressSanitizer a new thread maps and faults in
//! a fresh fake stack) or three directories.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Mutex, Once, OnceLock};

use super::{KIB, contain_mail_parser_panics, runtime, sampled};
use crate::backends::maildir::MaildirStore;
use crate::backends::model::{Budget, Filters, FolderSelector, Order, ScanRequest};
use crate::backends::{BackendError, MailStore};

// ----------------------------------------------------------------------------------------------
// mime_maildir
// ----------------------------------------------------------------------------------------------

/// The one message file's name: delivered at 2026-01-01T00:00:00Z, flag `S` (seen).
const MESSAGE_FILE: &str = "1767225600.M1P1.fuzz:2,S";
const MESSAGE_RECEIVED: i64 = 1_767_225_600;
/// The per-attachment cap used for fetches: the default `maxRawAttachmentBytes`.
const ATTACHMENT_CAP: u64 = 256 * KIB;

/// Fuzzes MIME parsing through the real Maildir backend: `data` becomes the only message of a
/// Maildir under `scratch`, which is then read back through [`MaildirStore`] exactly as the
/// tools do. The Maildir tree and its store
/// are made on the first call; every call rewrites the one message file, so each input is read
/// as a freshly delivered message (the store keeps nothing between calls: every operation lists
/// the folder and reads the file again).
///
/// `scratch` must be a private, writable directory that nothing else uses (the fuzz target
/// passes a temporary directory), the same one on every call of a process; only
/// `scratch/maildir/` is written.
///
/// Oracles: the folder list is exactly the inbox with one seen message; a scan lists the message
/// exactly once, also when filtered by its own sender, subject, date, flags and attachment state
/// and when searched for words of its own subject, and never when filtered by the opposite
/// attachment state; `get_message` succeeds and agrees with the scan; `list_attachments` agrees
/// with the scan on the count and on every size; the fetches of [`fetched_attachments`] return
/// exactly the listed size when the size is within the cap and `TooLarge` when it is not (the
/// first one also with a cap one byte below its size); an id past the end is `NotFound`. Every
/// input gets the scan, the subject search, `get_message` and the first fetch; a sample gets all
/// of them ([`FULL_ONE_IN`]). mime's own oracles on the raw bytes (every attachment's size,
/// numbering, determinism: four parses) are `mime_memory`'s, which shares this target's seeds;
/// here they doubled an input's cost for checks another target makes.
pub fn mime_maildir(scratch: &Path, data: &[u8]) {
    mime_maildir_inner(scratch, data);
}

/// The attachments whose backend fetch is checked: the first, the second and the last. A fetch
/// is one more parse of the whole message (16 of them were most of this target's time), and
/// what a fetch adds to `mime::fuzz_parse` (which checks every attachment's size in memory) does
/// not depend on the position: the id parsed back to an index (`att-1` and, past ten, a
/// two-digit one), the same numbering as the listing, and the cap. The last one is where a
/// numbering that drifts would show.
fn fetched_attachments(count: usize) -> impl Iterator<Item = usize> {
    let last = count.checked_sub(1).filter(|&last| last >= 2);
    (0..count.min(2)).chain(last)
}

/// Raw message bytes → the MIME view, in memory (no disk, no backend), for the hostile-shape
/// class of issue 8 (nesting depth, part count, header size). Oracles, beyond "no panic":
/// * the parse runs on the process's one worker thread ([`on_worker_stack`]), with a server
///   worker's stack (2 MiB): unbounded recursion aborts the process (a crash for libFuzzer),
///   as it would abort the server;
/// * output size: every header string ≤ `MAX_HEADER_CHARS`, the body ≤ `MAX_BODY_CHARS`, at
///   most `MAX_PARTS` attachments and `MAX_ADDRESSES` per address list, and all text together
///   at most 4 bytes per input byte plus 64 KiB (decoding may widen a byte, never multiply it);
/// * time: the oracle's four parses together take at most 1 s plus 20 µs per input byte, the
///   bound that held for one parse before (a quadratic shape of a 100 KB input blows through
///   this; libFuzzer's -timeout catches the hangs);
/// * a view with attachments beyond the parser's part limit is marked as cut;
/// * mime's own oracles (every attachment's size, numbering, determinism).
pub fn mime_memory(data: &[u8]) {
    contain_mail_parser_panics();
    on_worker_stack(data, check_mime_view);
}

/// Arbitrary bytes, read as UTF-8 (lossily) → `mime::html::to_text`, the renderer of HTML
/// bodies and HTML attachments, on a worker-sized stack ([`on_worker_stack`]). Until issue 36
/// this ran on every input of the MIME targets (the raw message read as HTML, three times: two
/// thirds of `mime_memory`'s time); here it gets inputs of its own, and its seeds and
/// dictionary are HTML.
///
/// Oracles: the text has at most the bound's characters and never holds `<script` in any ASCII
/// case, so a consumer that renders it as HTML cannot be scripted. The bound is one of 0
/// (nothing may come out), 7 (a cut inside the first line, at a character boundary) and 1,000,
/// picked by the input's length: one rendering per input instead of three (a rendering is
/// nearly all of an input's time), every property checked on every input, and each bound on a
/// third of them (a mutation that adds or drops a byte moves an input to another bound).
pub fn html_text(data: &[u8]) {
    on_worker_stack(data, check_html_text);
}

fn check_html_text(data: &[u8]) {
    let html = String::from_utf8_lossy(data);
    let max_chars = [0, 7, 1_000][data.len() % 3];
    let text = crate::mime::html::to_text(&html, max_chars);
    assert!(
        text.chars().count() <= max_chars,
        "oracle: to_text bounded to {max_chars} characters"
    );
    assert!(
        !text.to_ascii_lowercase().contains("<script"),
        "oracle: no <script in output"
    );
}

/// A check and the input it runs on.
type Job = (fn(&[u8]), Vec<u8>);

/// Runs `check(data)` on the process's one worker thread, whose stack is a server worker's
/// (2 MiB), and waits for it. One thread for the process, not one per input: a thread per input
/// cost more than the parse under AddressSanitizer (every new thread maps and faults in a fresh
/// fake stack). The stack is as deep on every input, since the loop below is the thread's only
/// frame under the check. A panic on the thread aborts the process through libFuzzer's hook, as
/// it did on a fresh thread.
fn on_worker_stack(data: &[u8], check: fn(&[u8])) {
    /// The jobs' way in and the way back that says one is done.
    struct Worker {
        jobs: SyncSender<Job>,
        done: Receiver<()>,
    }
    static WORKER: OnceLock<Mutex<Worker>> = OnceLock::new();
    let worker = WORKER.get_or_init(|| {
        let (jobs, inbox) = sync_channel::<Job>(0);
        let (finished, done) = sync_channel(0);
        std::thread::Builder::new()
            .name("fuzz-worker".to_owned())
            .stack_size(2 << 20)
            .spawn(move || {
                for (check, input) in inbox {
                    check(&input);
                    if finished.send(()).is_err() {
                        return;
                    }
                }
            })
            .expect("invariant: a worker thread can be spawned");
        Mutex::new(Worker { jobs, done })
    });
    let worker = worker
        .lock()
        .expect("invariant: the worker's lock is never poisoned");
    worker
        .jobs
        .send((check, data.to_vec()))
        .expect("oracle: the worker thread does not panic");
    worker
        .done
        .recv()
        .expect("oracle: the worker thread does not panic");
}

/// One input of `mime_memory` in this many (and the process's first) also gets the determinism
/// check of [`crate::mime::fuzz_parse_checking`], two of its four parses.
const AGAIN_ONE_IN: u64 = 8;

fn check_mime_view(data: &[u8]) {
    use crate::mime::{MAX_ADDRESSES, MAX_BODY_CHARS, MAX_HEADER_CHARS, MAX_REFERENCES};
    use mail_parser::parsers::message::MAX_PARTS;

    static FIRST: Once = Once::new();
    let started = std::time::Instant::now();
    let m = crate::mime::fuzz_parse_checking(data, sampled(&FIRST, data, AGAIN_ONE_IN));
    let budget = std::time::Duration::from_secs(1)
        + std::time::Duration::from_micros(20).saturating_mul(data.len() as u32);
    assert!(
        started.elapsed() <= budget,
        "oracle: time of the parses {:?} over {budget:?} for {} bytes",
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
}

fn mime_maildir_inner(scratch: &Path, data: &[u8]) {
    static FIRST: Once = Once::new();
    contain_mail_parser_panics();
    let maildir = scratch_maildir(scratch);
    maildir
        .dir
        .write(format!("cur/{MESSAGE_FILE}"), data)
        .expect("invariant: the message file can be written");
    let full = sampled(&FIRST, data, FULL_ONE_IN);
    runtime().block_on(check_maildir(&maildir.store, full));
}

/// One input in this many (and the process's first) gets every backend call of
/// [`check_maildir`]; the others get the four whose parse is a path of its own. The calls left
/// to the sample each cost a parse and two thread hand-overs, and what they check beyond those
/// four (a filter's logic over fields the scan already read, the id and cap arithmetic of a
/// fetch) hardly depends on the bytes: they were two thirds of an input's time.
const FULL_ONE_IN: u64 = 8;

/// The scratch Maildir of this process: the tree `scratch/maildir/{cur,new,tmp}`, a handle on
/// it to write the message with, and the store that reads it.
struct ScratchMaildir {
    scratch: PathBuf,
    dir: cap_std::fs::Dir,
    store: MaildirStore,
}

fn scratch_maildir(scratch: &Path) -> &'static ScratchMaildir {
    static MAILDIR: OnceLock<ScratchMaildir> = OnceLock::new();
    let maildir = MAILDIR.get_or_init(|| {
        let root = cap_std::fs::Dir::open_ambient_dir(scratch, cap_std::ambient_authority())
            .expect("invariant: the scratch directory opens");
        for sub in ["maildir/cur", "maildir/new", "maildir/tmp"] {
            root.create_dir_all(sub)
                .expect("invariant: the scratch Maildir can be created");
        }
        let open = || {
            root.open_dir("maildir")
                .expect("invariant: the scratch Maildir opens")
        };
        ScratchMaildir {
            scratch: scratch.to_owned(),
            dir: open(),
            store: MaildirStore::new(open()),
        }
    });
    assert_eq!(
        maildir.scratch, scratch,
        "invariant: one scratch directory per process"
    );
    maildir
}

/// The backend calls of one input, in two rounds of concurrent calls: the scan, then what needs
/// the listed message. Each call hops from the runtime to the blocking pool and on to the
/// Maildir worker pool and back, and parses the message again. Every input gets the calls whose
/// parse is its own path through the backend: the plain scan (the listing's parse), the search
/// for its subject (the prefilter and the HTML-gated parse), `get_message` (the full view) and
/// the fetch of its first attachment (the one-part parse). With `full` (a sample, see
/// [`FULL_ONE_IN`]) it also gets the calls that re-read one of those parses through other
/// backend logic: the folder list, the scans filtered by the message's own properties and by
/// the opposite attachment state, `list_attachments`, the other fetches of
/// [`fetched_attachments`], the cap one byte below a size, and an id past the end. The
/// assertions are the same as when every call ran on every input.
async fn check_maildir(store: &MaildirStore, full: bool) {
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
    let plain = request(Filters::default());
    let folders = async {
        match full {
            true => Some(store.list_folders().await),
            false => None,
        }
    };
    let (folders, page) = futures::join!(folders, store.scan(&plain, None));

    if let Some(folders) = folders {
        let folders = folders.expect("oracle: list_folders succeeds");
        assert_eq!(folders.len(), 1, "oracle: only the inbox exists");
        assert_eq!(folders[0].id, "INBOX", "oracle: the folder is the inbox");
        assert_eq!(folders[0].total, 1, "oracle: the inbox holds one message");
        assert_eq!(folders[0].unread, 0, "oracle: the message is seen (flag S)");
    }
    let page = page.expect("oracle: a scan succeeds");
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
    let own = request(Filters {
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
    });
    let opposite = request(Filters {
        has_attachments: Some(!listed.has_attachments),
        ..Filters::default()
    });
    let filtered = async {
        match full {
            true => Some(futures::join!(
                store.scan(&own, None),
                store.scan(&opposite, None)
            )),
            false => None,
        }
    };
    let subject = listed
        .subject
        .as_deref()
        .filter(|subject| !crate::text::query_tokens(subject).is_empty());
    let search = async {
        match subject {
            Some(subject) => Some(store.scan(&plain, Some(subject)).await),
            None => None,
        }
    };
    let count = listed.attachments.len();
    let fetched_ones: Vec<usize> = match full {
        true => fetched_attachments(count).collect(),
        false => (0..count.min(1)).collect(),
    };
    let fetches = futures::future::join_all(fetched_ones.into_iter().map(|index| async move {
        let id = format!("att-{index}");
        (
            index,
            store.attachment(&listed.id, &id, ATTACHMENT_CAP).await,
        )
    }));
    let metas = async {
        match full {
            true => Some(store.list_attachments(&listed.id).await),
            false => None,
        }
    };
    // The refusal below the size needs one more parse; probing the first attachment is enough
    // to cover the declared-size check.
    let below = async {
        match listed.attachments.first() {
            Some(first) if full && first.size > 0 => {
                Some(store.attachment(&listed.id, "att-0", first.size - 1).await)
            }
            _ => None,
        }
    };
    let past_end = format!("att-{count}");
    let past_end = async {
        match full {
            true => Some(
                store
                    .attachment(&listed.id, &past_end, ATTACHMENT_CAP)
                    .await,
            ),
            false => None,
        }
    };
    let (filtered, hits, detail, metas, fetched, below, past_end) = futures::join!(
        filtered,
        search,
        store.get_message(&listed.id),
        metas,
        fetches,
        below,
        past_end,
    );

    if let Some((found, none)) = filtered {
        let found = found.expect("oracle: a filtered scan succeeds");
        assert_eq!(
            found.items.len(),
            1,
            "oracle: filters built from the message match it"
        );
        let none = none.expect("oracle: a filtered scan succeeds");
        assert!(
            none.items.is_empty(),
            "oracle: the opposite attachment filter excludes the message"
        );
    }
    if let Some(hits) = hits {
        let hits = hits.expect("oracle: a search succeeds");
        assert_eq!(
            hits.items.len(),
            1,
            "oracle: searching for the subject's words finds the message"
        );
    }

    let detail = detail.expect("oracle: get_message succeeds for a listed id");
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

    if let Some(metas) = metas {
        let metas = metas.expect("oracle: list_attachments succeeds for a listed id");
        assert_eq!(
            metas.len(),
            count,
            "oracle: list_attachments and the scan agree"
        );
        for (index, meta) in metas.iter().enumerate() {
            assert_eq!(
                meta.id,
                format!("att-{index}"),
                "oracle: attachment ids are att-<position>"
            );
            assert_eq!(
                meta.size, listed.attachments[index].size,
                "oracle: list_attachments and the scan agree on sizes"
            );
        }
    }
    for (index, result) in fetched {
        let size = listed.attachments[index].size;
        match result {
            Ok((fetched, bytes)) => {
                assert!(size <= ATTACHMENT_CAP, "oracle: over the cap is TooLarge");
                assert_eq!(
                    bytes.len() as u64,
                    size,
                    "oracle: the decoded length is the listed size"
                );
                assert_eq!(fetched.size, size, "oracle: the fetched meta agrees");
            }
            Err(BackendError::TooLarge) => assert!(
                size > ATTACHMENT_CAP,
                "oracle: TooLarge only over the cap (listed size {size}, the decoded length differs)"
            ),
            Err(error) => panic!("oracle: a listed attachment can be fetched: {error:?}"),
        }
    }
    if let Some(below) = below {
        assert!(
            matches!(below, Err(BackendError::TooLarge)),
            "oracle: a cap one below the size is TooLarge"
        );
    }
    if let Some(past_end) = past_end {
        assert!(
            matches!(past_end, Err(BackendError::NotFound)),
            "oracle: an attachment id past the end is NotFound"
        );
    }
}
