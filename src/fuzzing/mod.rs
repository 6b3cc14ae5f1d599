//! Fuzzing entry points: the only `pub` surface besides [`crate::run`], compiled only under
//! `cfg(fuzzing)` (cargo-fuzz sets it for every crate), so no ordinary build ever sees it.
//!
//! Purpose: each `fuzz/fuzz_targets/*.rs` is one line that calls a function here, because the
//! modules under test are `pub(crate)`. The policy crate's targets (config, gates, outbound) are
//! in `fuzz-policy/` and call `mailgate_policy::fuzzing`. Every entry point states an oracle that is stronger than
//! "does not panic" (style rule 14), and signals a violation by panicking with a message that
//! starts with `oracle:`; libFuzzer then saves the input under `fuzz/artifacts/<target>/`.
//!
//! Invariants: an entry point never touches the process environment or any path outside the
//! scratch directory it is given; it is deterministic for a given input (modulo the scratch
//! directory's contents, which it rewrites on every call).
//!
//! The write and handoff families' entry points, which only forward to oracles beside the code
//! they check, are in [`write`].
//!
//! Who may call it: the fuzz targets in `fuzz/` only.

use std::path::Path;
use std::sync::{Once, OnceLock};

pub mod write;

use crate::backends::maildir::MaildirStore;
use crate::backends::model::{Budget, Filters, FolderSelector, Order, ScanRequest};
use crate::backends::{BackendError, MailStore};

const KIB: u64 = 1024;

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

// ----------------------------------------------------------------------------------------------
// graph_wire
// ----------------------------------------------------------------------------------------------

/// The Graph root the `graph_wire` target configures, and its parts restated by hand, so the
/// next-link oracle does not trust `Endpoints` to describe itself.
const GRAPH_BASE: &str = "https://graph.microsoft.com/v1.0";
const GRAPH_HOST: &str = "graph.microsoft.com";
const GRAPH_PATH_PREFIX: &str = "/v1.0/";
const GRAPH_MAILBOX: &str = "finance@example.com";

/// Untrusted Graph bytes → the Graph backend's parsers. The first byte picks the parser (its
/// value modulo 6), the rest is what Graph (or whoever answers in its place) sent:
/// * 0: a message page (`Collection<Value>`, each item → `Message` → `summary` and
///   `into_detail`), and its `@odata.nextLink` through `Endpoints::next_link`;
/// * 1: an attachment page (`Collection<Attachment>` → `into_meta`);
/// * 2: a `$batch` answer (`BatchResponse`; each 2xx step's body as a message and as an
///   attachment page, as the search fallback reads them);
/// * 3: a nextLink string; 4: a `Retry-After` header value; 5: a caller-supplied id.
///
/// Oracles, beyond "no panic": previews ≤ `PREVIEW_CHARS` and a prefix of `bodyPreview`;
/// details keep the body ≤ `MAX_BODY_CHARS` (script-free when rendered from HTML), at most
/// `MAX_ADDRESSES` To and Cc each with `recipients_cut` exactly when more were listed, at most
/// `MAX_REFERENCES` references, each `<…>`; ids and attachment fields pass through unchanged,
/// an attachment's content type is never blank; a nextLink is accepted exactly when it parses
/// with the base's scheme, host and port and a path under `/v1.0/`, and the accepted URL has no
/// userinfo, fragment or dot segment and reads back as itself; `retry_after` never exceeds
/// `MAX_WAIT`; `segment` refuses exactly the empty, `.`, `..`, over-long and control-character
/// ids, and an accepted id becomes exactly one path segment that decodes back to it.
pub fn graph_wire(data: &[u8]) {
    let Some((&selector, payload)) = data.split_first() else {
        return;
    };
    match selector % 6 {
        0 => graph_message_page(payload),
        1 => {
            if let Ok(page) = serde_json::from_slice::<serde_json::Value>(payload) {
                graph_attachment_page(page);
            }
        }
        2 => graph_batch(payload),
        3 => {
            if let Ok(link) = std::str::from_utf8(payload) {
                graph_next_link(link);
            }
        }
        4 => graph_retry_after(payload),
        _ => {
            if let Ok(id) = std::str::from_utf8(payload) {
                graph_segment(id);
            }
        }
    }
}

fn graph_endpoints() -> &'static crate::backends::graph::endpoints::Endpoints {
    static ENDPOINTS: OnceLock<crate::backends::graph::endpoints::Endpoints> = OnceLock::new();
    ENDPOINTS.get_or_init(|| {
        crate::backends::graph::endpoints::Endpoints::new(
            GRAPH_BASE,
            "https://login.microsoftonline.com",
            "22222222-2222-4222-8222-222222222222",
        )
        .expect("invariant: the fuzz target's Graph root is valid")
    })
}

fn graph_message_page(payload: &[u8]) {
    use crate::backends::graph::wire::Collection;
    // As the listing reads a page: the page first, then each item on its own, so one bad item
    // is a gap and not a failed page.
    let Ok(page) = serde_json::from_slice::<Collection<serde_json::Value>>(payload) else {
        return;
    };
    for item in page.value.into_iter().take(64) {
        graph_message(item, "fuzz-folder");
    }
    if let Some(link) = page.next_link {
        graph_next_link(&link);
    }
}

/// One message item, as a listing (`summary`) and as a read (`into_detail`) see it.
fn graph_message(item: serde_json::Value, folder_hint: &str) {
    use crate::backends::graph::wire::Message;
    use crate::backends::model::PREVIEW_CHARS;
    use crate::mime::{MAX_ADDRESSES, MAX_BODY_CHARS, MAX_REFERENCES};

    let Ok(mut message) = serde_json::from_value::<Message>(item.clone()) else {
        return;
    };
    let raw_preview = message.body_preview.clone().unwrap_or_default();
    let summary = message.summary(folder_hint);
    assert_eq!(summary.id, message.id, "oracle: the summary keeps the id");
    assert_eq!(
        summary.folder_id,
        message
            .parent_folder_id
            .clone()
            .unwrap_or_else(|| folder_hint.to_owned()),
        "oracle: the folder is parentFolderId, else the hint"
    );
    assert!(
        summary.preview.chars().count() <= PREVIEW_CHARS,
        "oracle: preview of {} chars over PREVIEW_CHARS",
        summary.preview.chars().count()
    );
    assert!(
        raw_preview.starts_with(&summary.preview),
        "oracle: the preview is a prefix of bodyPreview"
    );
    assert_eq!(
        summary.attachments_listed, !summary.has_attachments,
        "oracle: a summary's attachments are listed only when there are none"
    );

    let Ok(message) = serde_json::from_value::<Message>(item) else {
        panic!("oracle: the same item parses twice");
    };
    let id = message.id.clone();
    let listed = |list: &[crate::backends::graph::wire::Recipient]| {
        list.iter().filter(|r| r.email_address.is_some()).count()
    };
    let over = listed(&message.to_recipients) > MAX_ADDRESSES
        || listed(&message.cc_recipients) > MAX_ADDRESSES;
    let (html, raw_body) = match &message.body {
        Some(body) => (
            body.content_type
                .as_deref()
                .is_some_and(|t| t.eq_ignore_ascii_case("html"))
                && body.content.is_some(),
            body.content.clone(),
        ),
        None => (false, None),
    };
    let detail = message.into_detail(Vec::new());
    assert_eq!(detail.summary.id, id, "oracle: the detail keeps the id");
    assert!(
        detail.summary.attachments_listed,
        "oracle: a detail's attachments are listed"
    );
    assert!(
        detail.body_text.chars().count() <= MAX_BODY_CHARS,
        "oracle: body of {} chars over MAX_BODY_CHARS",
        detail.body_text.chars().count()
    );
    assert!(
        detail.to.len() <= MAX_ADDRESSES && detail.cc.len() <= MAX_ADDRESSES,
        "oracle: recipient lists bounded"
    );
    assert_eq!(
        detail.recipients_cut, over,
        "oracle: recipients_cut says exactly whether a list was cut"
    );
    assert!(
        detail.references.len() <= MAX_REFERENCES,
        "oracle: references bounded"
    );
    for r in &detail.references {
        assert!(
            r.starts_with('<') && r.ends_with('>'),
            "oracle: a reference is a <message id>"
        );
    }
    assert_eq!(detail.body_is_html, html, "oracle: body_is_html");
    if html {
        assert!(
            !detail.body_text.to_ascii_lowercase().contains("<script"),
            "oracle: no <script in a rendered HTML body"
        );
    } else {
        let plain = raw_body.unwrap_or_default().replace("\r\n", "\n");
        assert!(
            plain.starts_with(&detail.body_text),
            "oracle: a text body is a prefix of the content"
        );
    }
}

fn graph_attachment_page(page: serde_json::Value) {
    use crate::backends::graph::wire::{Attachment, AttachmentKind, Collection};
    let Ok(page) = serde_json::from_value::<Collection<Attachment>>(page) else {
        return;
    };
    for attachment in page.value {
        let (id, name, size, inline) = (
            attachment.id.clone(),
            attachment.name.clone(),
            attachment.size,
            attachment.is_inline,
        );
        let kind = attachment.kind();
        let declared = attachment.content_type.clone();
        let meta = attachment.into_meta();
        assert!(
            meta.id == id && meta.name == name && meta.size == size && meta.is_inline == inline,
            "oracle: attachment fields pass through"
        );
        assert!(
            !meta.content_type.trim().is_empty(),
            "oracle: a content type is never blank"
        );
        match kind {
            AttachmentKind::Item => assert_eq!(
                meta.content_type, "message/rfc822",
                "oracle: an item attachment is a message"
            ),
            _ => {
                if let Some(t) = declared.filter(|t| !t.trim().is_empty()) {
                    assert_eq!(meta.content_type, t, "oracle: a declared type is kept");
                }
            }
        }
    }
}

fn graph_batch(payload: &[u8]) {
    let Ok(answer) = serde_json::from_slice::<crate::backends::graph::wire::BatchResponse>(payload)
    else {
        return;
    };
    for step in answer.responses.into_iter().take(40) {
        match reqwest::StatusCode::from_u16(step.status) {
            Ok(s) if s.is_success() => {
                graph_message(step.body.clone(), "");
                graph_attachment_page(step.body);
            }
            Ok(s) => {
                let _ = crate::backends::graph::client::classify(s);
            }
            Err(_) => {}
        }
    }
}

fn graph_next_link(link: &str) {
    let endpoints = graph_endpoints();
    let answer = endpoints.next_link(link);
    // The rule restated from the constants: same scheme, host and port, a path under the
    // version root.
    let should = reqwest::Url::parse(link).is_ok_and(|u| {
        u.scheme() == "https"
            && u.host_str() == Some(GRAPH_HOST)
            && u.port_or_known_default() == Some(443)
            && u.path().starts_with(GRAPH_PATH_PREFIX)
    });
    match answer {
        Ok(url) => {
            assert!(
                should,
                "oracle: next_link accepted a link off the Graph root"
            );
            assert!(
                url.scheme() == "https"
                    && url.host_str() == Some(GRAPH_HOST)
                    && url.port_or_known_default() == Some(443)
                    && url.path().starts_with(GRAPH_PATH_PREFIX),
                "oracle: the accepted URL is on the Graph root"
            );
            assert!(
                url.username().is_empty() && url.password().is_none(),
                "oracle: no userinfo in an accepted link"
            );
            assert!(url.fragment().is_none(), "oracle: no fragment");
            for s in url.path_segments().into_iter().flatten() {
                let decoded = percent_decoded(s);
                assert!(
                    decoded != "." && decoded != "..",
                    "oracle: no dot segment in an accepted link"
                );
            }
            assert_eq!(
                reqwest::Url::parse(url.as_str()).ok().as_ref(),
                Some(&url),
                "oracle: the accepted URL reads back as itself"
            );
        }
        Err(e) => {
            assert!(
                !should,
                "oracle: next_link refused a link on the Graph root"
            );
            assert!(
                matches!(e, BackendError::Malformed),
                "oracle: a refused link is Malformed"
            );
        }
    }
}

/// `%XX` decoded byte by byte (lossy), enough to see a `.` hidden as `%2e`.
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn graph_retry_after(payload: &[u8]) {
    use crate::backends::graph::client::{MAX_WAIT, retry_after};
    let Ok(value) = reqwest::header::HeaderValue::from_bytes(payload) else {
        return;
    };
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::RETRY_AFTER, value);
    if let Some(wait) = retry_after(&headers) {
        assert!(wait <= MAX_WAIT, "oracle: a wait of {wait:?} over MAX_WAIT");
    }
    // Delta-seconds are read exactly (capped); anything else is a date or nothing. Only a
    // value of visible ASCII (and blanks) is read at all: `4` followed by U+2029 is no number.
    let ascii = payload
        .iter()
        .all(|b| b.is_ascii_graphic() || *b == b' ' || *b == b'\t');
    if let Ok(seconds) = std::str::from_utf8(payload)
        .unwrap_or("")
        .trim_matches([' ', '\t'])
        .parse::<u64>()
        && ascii
    {
        assert_eq!(
            retry_after(&headers),
            Some(std::time::Duration::from_secs(seconds).min(MAX_WAIT)),
            "oracle: delta-seconds read exactly"
        );
    }
}

fn graph_segment(id: &str) {
    use crate::backends::graph::endpoints::{MAX_ID_LEN, segment};
    let refuse = id.is_empty()
        || id == "."
        || id == ".."
        || id.len() > MAX_ID_LEN
        || id.chars().any(char::is_control);
    match segment(id) {
        Err(e) => {
            assert!(refuse, "oracle: segment refused a valid id");
            assert!(
                matches!(e, BackendError::BadId),
                "oracle: a refused id is BadId"
            );
        }
        Ok(accepted) => {
            assert!(!refuse, "oracle: segment accepted an invalid id");
            assert_eq!(accepted, id, "oracle: an accepted id is unchanged");
            let endpoints = graph_endpoints();
            let url = endpoints.user(GRAPH_MAILBOX, &["messages", accepted, "attachments"]);
            let segments: Vec<&str> = url.path_segments().into_iter().flatten().collect();
            assert_eq!(
                segments.len(),
                6,
                "oracle: /v1.0/users/<mailbox>/messages/<id>/attachments, got {}",
                url.path()
            );
            assert!(
                segments[..4] == ["v1.0", "users", GRAPH_MAILBOX, "messages"]
                    && segments[5] == "attachments",
                "oracle: the fixed segments stay in place: {}",
                url.path()
            );
            assert_eq!(
                percent_decoded(segments[4]),
                id,
                "oracle: the id's segment decodes back to the id"
            );
            // What reqwest sends is the serialised URL: reading it again changes nothing.
            assert_eq!(
                reqwest::Url::parse(url.as_str()).ok().as_ref(),
                Some(&url),
                "oracle: the URL reads back as itself"
            );
            assert!(
                url.query().is_none() && url.fragment().is_none(),
                "oracle: an id adds no query or fragment"
            );
            assert!(
                endpoints.relative(&url).starts_with("/users/"),
                "oracle: a batch step stays under the root"
            );
        }
    }
}

/// One current-thread runtime per process: the backend runs its file work on the blocking pool,
/// whose threads are reused across inputs.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("invariant: a tokio runtime can be built")
    })
}

/// `crate::mime` contains panics raised inside mail-parser (it has reachable `debug_assert!`s,
/// and fuzz builds enable debug assertions) with `catch_unwind`. libFuzzer's panic hook aborts
/// before any unwinding, which would report that documented, contained case as a crash. This
/// wraps the hook once: a panic located in mail-parser's own source unwinds silently to mime's
/// `catch_unwind`; every other panic still goes to libFuzzer's hook (and aborts). If a
/// mail-parser panic ever escapes mime, libFuzzer's catch of the target body still aborts.
fn contain_mail_parser_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_mail_parser = info.location().is_some_and(|location| {
                // The registry copy (`mail-parser-0.11.9/src/…`) or the vendored backport
                // (`vendor/mail-parser/src/…`).
                let file = location.file();
                file.contains("mail-parser") && file.contains("/src/")
            });
            if !in_mail_parser {
                previous(info);
            }
        }));
    });
}

// ----------------------------------------------------------------------------------------------
// graph_delta
// ----------------------------------------------------------------------------------------------

/// Untrusted bytes → `wire::parse_delta_page`, the parser of a `messages/delta` page the local
/// index syncs from (Graph, or whoever answers in its place, sent them).
///
/// Oracles, beyond "no panic": an accepted page came from a JSON object whose `value` array
/// holds exactly one entry per item read (changed plus removed); every item read has a
/// non-empty id and every changed one a non-empty version; the link onward is non-empty;
/// writing the page back as Graph would (`DeltaPage::to_json`) and reading it again gives the
/// same page, so nothing is lost or invented between a page and the index's view of it.
pub fn graph_delta(data: &[u8]) {
    use crate::backends::graph::wire::{DeltaLink, parse_delta_page};
    let Ok(page) = parse_delta_page(data) else {
        return;
    };
    // serde skips the fields it ignores without checking their UTF-8 (a page with a broken
    // byte in an ignored key is read, rightly: the index takes nothing from it), where a JSON
    // value would refuse it; read the structure through a lossy decoding instead.
    let raw: serde_json::Value = serde_json::from_str(&String::from_utf8_lossy(data))
        .expect("oracle: an accepted delta page is JSON");
    let entries = raw
        .get("value")
        .and_then(serde_json::Value::as_array)
        .map(Vec::len);
    assert_eq!(
        entries,
        Some(page.changed.len() + page.removed.len()),
        "oracle: one item read per entry of `value`"
    );
    for item in &page.changed {
        assert!(!item.id.is_empty(), "oracle: a changed item has an id");
        assert!(
            !item.version.is_empty(),
            "oracle: a changed item has a version"
        );
    }
    for id in &page.removed {
        assert!(!id.is_empty(), "oracle: a removed item has an id");
    }
    match &page.link {
        DeltaLink::Next(l) | DeltaLink::Delta(l) => {
            assert!(!l.is_empty(), "oracle: the link onward is not empty");
        }
    }
    let written = serde_json::to_vec(&page.to_json()).expect("invariant: a JSON value serialises");
    let again = parse_delta_page(&written).expect("oracle: a written-back page parses");
    assert_eq!(again, page, "oracle: a written-back page reads the same");
}

// ----------------------------------------------------------------------------------------------
// imap_query
// ----------------------------------------------------------------------------------------------

/// Bytes → IMAP `UID SEARCH` criteria and mailbox names (issue 12). The bytes are decoded into
/// criteria (`query::criteria_from_bytes`: strings with quotes, backslashes, controls and
/// non-ASCII, dates out of range, bad UID sets, nesting past the bound, searches past the
/// length bound), and the same bytes are read as a wire mailbox name.
///
/// Oracles, beyond "no panic" (`query::check_criteria`, `mutf7::check_name`): `to_arguments`
/// refuses exactly when an independent walk finds a reason (a control character, a bound, a
/// bad UID set or date), and then with one of them; an accepted line is one line without
/// control characters, at most `MAX_ARGUMENT_BYTES`, equal to a plain reference rendering,
/// with `CHARSET UTF-8` exactly when a string is not ASCII, and `parse_arguments` gives back
/// the same criteria (so every string was quoted). A name `mutf7::decode` accepts is canonical
/// (`encode` gives it back); plain ASCII without `&` is itself; `encode` of any text is
/// printable ASCII and decodes back to the text.
pub fn imap_query(data: &[u8]) {
    use crate::backends::imap::{mutf7, query};
    query::check_criteria(&query::criteria_from_bytes(data));
    mutf7::check_name(data);
}

// ----------------------------------------------------------------------------------------------
// imap_response
// ----------------------------------------------------------------------------------------------

/// Bytes → what an IMAP server may send: the read shield (`imap::shield::Scanner`) reads them,
/// fed whole and again in two pieces split at the first byte's value; what it accepts goes to
/// imap-proto's response parser (which recurses per nesting level and panics on some status
/// lines: the reasons for the shield) and every BODYSTRUCTURE found to the attachment walk
/// (`imap::structure::analyze`).
///
/// Oracles, beyond "no panic and no stack overflow": the shield's verdict does not depend on how
/// the bytes are split into reads; an accepted line never nests deeper than
/// `shield::MAX_PAREN_DEPTH`; the walk keeps its part bound, and every attachment id is a
/// section path (dot-separated positive numbers) the attachment reader accepts.
pub fn imap_response(data: &[u8]) {
    use crate::backends::imap::{shield, structure};
    let whole = shield::Scanner::default().feed(data);
    let split = usize::from(data.first().copied().unwrap_or(0)).min(data.len());
    let mut pieces = shield::Scanner::default();
    let in_pieces = pieces
        .feed(&data[..split])
        .and_then(|()| pieces.feed(&data[split..]));
    assert_eq!(whole, in_pieces, "the verdict depends on the split");
    if whole.is_err() {
        return;
    }
    let mut rest = data;
    for _ in 0..64 {
        let Ok((left, response)) = imap_proto::Response::parse(rest) else {
            return;
        };
        if let imap_proto::Response::Fetch(_, attributes) = &response {
            for attribute in attributes {
                if let imap_proto::AttributeValue::BodyStructure(body) = attribute {
                    let found = structure::analyze(body);
                    assert!(found.attachments.parts.len() <= structure::MAX_PARTS);
                    for part in &found.attachments.parts {
                        let id = &part.meta.id;
                        assert!(
                            !id.is_empty()
                                && id.split('.').all(|n| {
                                    !n.is_empty()
                                        && !n.starts_with('0')
                                        && n.bytes().all(|b| b.is_ascii_digit())
                                }),
                            "attachment id {id:?} is not a section path"
                        );
                    }
                }
            }
        }
        if left.len() == rest.len() {
            return;
        }
        rest = left;
    }
}

// ----------------------------------------------------------------------------------------------
// extract_pdf
// ----------------------------------------------------------------------------------------------

/// The budgets the target cycles through (by input length): none, a few words, a paragraph, the
/// default-sized answer.
const PDF_BUDGETS: [usize; 4] = [0, 7, 100, 10_000];
/// The second, larger budget an accepted input is read again with.
const PDF_LARGE_BUDGET: usize = 100_000;

/// Bytes → `extract::pdf::extract` (issue 13), as the worker calls it.
///
/// Oracles, beyond "no uncaught panic, no stack overflow, no hang": the answer is `Ok` or a
/// typed error (`Failed`, `Encrypted`; never `Unsupported` or a ZIP code); `Ok` text has at most
/// `max_chars` scalar values, says extractor `pdf`, and is normalised (no leading or trailing
/// whitespace, no control character but `\n`, no doubled space, no three newlines in a row);
/// read again with a larger budget it is a prefix of the larger answer (equal when it was not
/// truncated), so the budget only ever cuts.
pub fn extract_pdf(data: &[u8]) {
    use crate::extract::{Caps, ExtractError, pdf};
    silence_panics();
    let max_chars = PDF_BUDGETS[data.len() % PDF_BUDGETS.len()];
    let caps = |max_chars| Caps {
        max_chars,
        ..Caps::default()
    };
    let small = match pdf::extract(data, &caps(max_chars)) {
        Ok(small) => small,
        Err(ExtractError::Failed | ExtractError::Encrypted) => return,
        Err(other) => panic!("oracle: untyped PDF error {other:?}"),
    };
    let text = &small.text;
    assert!(
        text.chars().count() <= max_chars,
        "oracle: {} chars over a budget of {max_chars}",
        text.chars().count()
    );
    assert_eq!(
        (small.extractor, small.unread_parts),
        ("pdf", 0),
        "oracle: extractor"
    );
    assert_eq!(text.trim(), text, "oracle: untrimmed text");
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n')
            && !text.contains("  ")
            && !text.contains("\n\n\n"),
        "oracle: unnormalised text {text:?}"
    );
    // The larger read may fail where the small one stopped early (a later page pdf-extract
    // panics on): only two successes are compared.
    if let Ok(large) = pdf::extract(data, &caps(PDF_LARGE_BUDGET)) {
        if small.truncated {
            assert!(
                large.text.starts_with(text.as_str()),
                "oracle: {text:?} is not a prefix of the larger answer"
            );
        } else {
            assert_eq!(
                (&large.text, large.truncated),
                (text, false),
                "oracle: the budget changed an untruncated answer"
            );
        }
    }
}

/// libFuzzer's panic hook aborts before any unwinding, which would turn every panic
/// `extract::pdf` catches (pdf-extract and lopdf panic on malformed input by design; production
/// reports them as `EXTRACTION_FAILED`) into a crash. This target's process gets, once, a hook
/// that does nothing, so caught panics unwind to that `catch_unwind` as in production. A panic
/// that escapes it still reaches libfuzzer-sys's own `catch_unwind` around the target body,
/// which aborts: that is a finding (without the panic message, which a unit test with the
/// saved input shows).
fn silence_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| std::panic::set_hook(Box::new(|_| {})));
}

// ----------------------------------------------------------------------------------------------
// extract_zip
// ----------------------------------------------------------------------------------------------

/// Small caps, so a fuzzed archive trips them often and every run stays fast.
fn extraction_caps() -> crate::extract::Caps {
    crate::extract::Caps {
        max_chars: 512,
        max_zip_entries: 64,
        max_zip_uncompressed_bytes: 256 * KIB,
        max_container_entries: 64,
        max_container_uncompressed_bytes: 256 * KIB,
    }
}

/// The per-entry cap of `extract_zip`'s reads.
const ZIP_ENTRY_CAP: u64 = 64 * KIB;

/// Bytes → an attached ZIP archive (issue 13): `extract::zip::list`, then `read_entry` of the
/// first listed entry without and with a password, and of a traversal name.
///
/// Oracles, beyond "no panic": every failure is a ZIP code; a listing holds at most
/// `max_zip_entries` entries (listed plus hidden) and only names `is_addressable_entry`
/// accepts; a listed entry is never `ZIP_ENTRY_NOT_FOUND`; a read returns at most the cap and
/// at most the entry's declared size; a non-addressable name is never found.
pub fn extract_zip(data: &[u8]) {
    use crate::extract::{ExtractError, ZipError, is_addressable_entry, zip};
    let caps = extraction_caps();
    let listing = match zip::list(data, &caps) {
        Ok(listing) => listing,
        Err(error) => {
            assert!(
                matches!(error, ExtractError::Zip(_)),
                "oracle: list failed with {error:?}"
            );
            return;
        }
    };
    assert!(
        listing.entries.len() + listing.hidden_entries <= caps.max_zip_entries,
        "oracle: {} listed + {} hidden entries over the cap",
        listing.entries.len(),
        listing.hidden_entries
    );
    for entry in &listing.entries {
        assert!(
            is_addressable_entry(&entry.name),
            "oracle: listed {:?}",
            entry.name
        );
    }
    if let Some(first) = listing.entries.first() {
        for password in [None, Some("fuzz-password")] {
            match zip::read_entry(data, &first.name, password, ZIP_ENTRY_CAP, &caps) {
                Ok(bytes) => {
                    let len = bytes.len() as u64;
                    assert!(len <= ZIP_ENTRY_CAP, "oracle: {len} bytes over the cap");
                    assert!(
                        len <= first.uncompressed_size,
                        "oracle: {len} bytes, {} declared",
                        first.uncompressed_size
                    );
                }
                Err(ExtractError::Zip(ZipError::EntryNotFound)) => {
                    panic!("oracle: listed entry {:?} not found", first.name)
                }
                Err(ExtractError::Zip(_)) => {}
                Err(error) => panic!("oracle: read failed with {error:?}"),
            }
        }
    }
    for name in ["../x", "/x", "a\\b"] {
        assert_eq!(
            zip::read_entry(data, name, None, ZIP_ENTRY_CAP, &caps),
            Err(ExtractError::Zip(ZipError::EntryNotFound)),
            "oracle: {name:?} was addressed"
        );
    }
}

// ----------------------------------------------------------------------------------------------
// extract_ooxml
// ----------------------------------------------------------------------------------------------

/// Bytes → `extract::docx::extract` and `extract::xlsx::extract` with small caps (issue 13).
///
/// Oracles, beyond "no panic": the text has at most `max_chars` Unicode scalar values and the
/// right extractor name; a ZIP code from a document is only a tripped container cap
/// (`ZIP_TOO_LARGE`, `ZIP_TOO_MANY_ENTRIES`), everything else being `EXTRACTION_FAILED` or
/// `ENCRYPTED`.
pub fn extract_ooxml(data: &[u8]) {
    use crate::extract::{ExtractError, Extracted, ZipError, docx, xlsx};
    let caps = extraction_caps();
    let results: [(&str, Result<Extracted, ExtractError>); 2] = [
        ("docx", docx::extract(data, &caps)),
        ("xlsx", xlsx::extract(data, &caps)),
    ];
    for (extractor, result) in results {
        match result {
            Ok(extracted) => {
                let chars = extracted.text.chars().count();
                assert!(
                    chars <= caps.max_chars,
                    "oracle: {extractor} gave {chars} chars"
                );
                assert_eq!(extracted.extractor, extractor, "oracle: extractor name");
            }
            Err(ExtractError::Zip(ZipError::TooLarge | ZipError::TooManyEntries))
            | Err(ExtractError::Failed | ExtractError::Encrypted) => {}
            Err(error) => panic!("oracle: {extractor} failed with {error:?}"),
        }
    }
}

// ----------------------------------------------------------------------------------------------
// http_guard
// ----------------------------------------------------------------------------------------------

/// Bytes → the HTTP transport's head checks (`transport::http::guard`): a `Host`, an `Origin`, an
/// `Authorization` value and a request target, split at NUL bytes.
///
/// Oracles, beyond "no panic": an accepted head has a Host of a loopback name or 127/8 address
/// with exactly the bound port, an Origin (when present) whose serialization is on the
/// allowlist, and an accepted bearer carries exactly the configured token (`guard::fuzz`).
pub fn http_guard(data: &[u8]) {
    crate::transport::http::fuzz_guard(data);
}

// ----------------------------------------------------------------------------------------------
// embeddings
// ----------------------------------------------------------------------------------------------

/// Untrusted bytes → the embeddings endpoint's answer parser (`embed::wire::parse_embeddings`).
/// The first byte is the number of inputs the request had (0 to 40, past the batch size of 32);
/// the rest is the answer.
///
/// Oracles, beyond "no panic": an accepted answer gives exactly that many vectors, all of one
/// dimension within 1..=4096, every number finite; the same vectors encoded as an endpoint would
/// and parsed again come back equal; and the same bytes with any other input count are refused.
pub fn embeddings(data: &[u8]) {
    use crate::embed::wire::{MAX_DIMENSION, encode, parse_embeddings};
    let Some((&first, answer)) = data.split_first() else {
        return;
    };
    let expected = usize::from(first % 41);
    let Ok(vectors) = parse_embeddings(answer, expected) else {
        return;
    };
    assert_eq!(vectors.len(), expected, "oracle: one vector per input");
    if let Some(first) = vectors.first() {
        let dim = first.len();
        assert!(
            (1..=MAX_DIMENSION).contains(&dim),
            "oracle: dimension {dim}"
        );
        assert!(
            vectors.iter().all(|v| v.len() == dim),
            "oracle: one dimension"
        );
    }
    assert!(
        vectors.iter().flatten().all(|x| x.is_finite()),
        "oracle: finite numbers only"
    );
    let again = parse_embeddings(&encode(&vectors), expected);
    assert_eq!(
        again.as_ref(),
        Ok(&vectors),
        "oracle: re-encoding round trip"
    );
    assert!(
        parse_embeddings(answer, expected + 1).is_err(),
        "oracle: the count is checked"
    );
}

// ----------------------------------------------------------------------------------------------
// mcp_surface
// ----------------------------------------------------------------------------------------------

/// Untrusted client text → a `resources/read` URI (`resources::uri::ResourceUri::parse`) and a
/// continuation cursor (`tools::cursor::redeem`).
///
/// Oracles, beyond "no panic": an accepted URI names a valid alias and its canonical form parses
/// back to the same view; arbitrary text never redeems as a cursor unless it is exactly one
/// issued for the request, and an issued one round-trips to its position, for its tool only.
pub fn mcp_surface(data: &[u8]) {
    use crate::resources::uri::ResourceUri;
    let text = String::from_utf8_lossy(data);
    if let Ok(parsed) = ResourceUri::parse(&text) {
        if let ResourceUri::Alias { alias, .. } = &parsed {
            assert!(
                crate::alias::Alias::parse(alias.as_str()).is_ok(),
                "oracle: a valid alias"
            );
        }
        assert_eq!(
            ResourceUri::parse(&parsed.to_uri()).as_ref(),
            Ok(&parsed),
            "oracle: canonical round trip"
        );
    }
    crate::tools::cursor::fuzz(data);
}

// ----------------------------------------------------------------------------------------------
// text_differential
// ----------------------------------------------------------------------------------------------

/// Arbitrary text and a reader's query built from what it shows → every matcher (the live
/// scan, the Maildir scan's folded match, the evidence signals, the index). The first six bytes
/// pick the query (which visible words, a piece of an unspaced run, the normalization form,
/// the case, accents left out); the rest, read as UTF-8 (lossily), is the text.
///
/// Oracle (`differential::check`): every matcher finds the text, so none can answer
/// `NOT_FOUND` for a word the mail shows.
pub fn text_differential(scratch: &Path, data: &[u8]) {
    use crate::differential::{Pick, check, query_for};
    use crate::index::tantivy_index::TantivyIndex;

    /// One index for the process: each input replaces the one message it holds.
    static INDEX: OnceLock<TantivyIndex> = OnceLock::new();
    let Some((head, rest)) = data.split_first_chunk::<6>() else {
        return;
    };
    let text = String::from_utf8_lossy(&rest[..rest.len().min(4_096)]);
    let pick = Pick {
        first: usize::from(head[0]),
        more: usize::from(head[1]),
        piece: (head[2] & 1 == 1).then_some((usize::from(head[3]), usize::from(head[4]))),
        form: head[5] & 3,
        case: (head[5] >> 2) % 3,
        no_marks: head[5] & 0x10 != 0,
    };
    let Some(query) = query_for(&text, pick) else {
        return;
    };
    let index = INDEX.get_or_init(|| {
        let root = cap_std::fs::Dir::open_ambient_dir(scratch, cap_std::ambient_authority())
            .expect("invariant: the scratch directory opens");
        let _ = root.create_dir("text_differential");
        let dir = root
            .open_dir("text_differential")
            .expect("invariant: the index directory opens");
        TantivyIndex::open(crate::index::capdir::CapDirectory::new(dir), true)
            .expect("invariant: an index can be created")
    });
    if let Err(miss) = check(&text, &query, index) {
        panic!("oracle: {miss}");
    }
}
