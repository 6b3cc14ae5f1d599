//! Fuzz entry points of the Graph backend's parsers: wire pages, `$batch` answers, nextLinks,
//! `Retry-After` and caller ids (`graph_wire`), and the delta feed (`graph_delta`), each with its
//! oracle. Compiled only under `cfg(fuzzing)`.

use std::sync::OnceLock;

use crate::backends::BackendError;

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
    // value would refuse it; read the structure through a lossy decoding instead. It also
    // skips an ignored number without reading its value, where a JSON value refuses one past
    // `f64` (`1e400`): the entries are counted as serde skips them, not read into a value.
    #[derive(serde::Deserialize)]
    struct Entries {
        value: Option<Vec<serde::de::IgnoredAny>>,
    }
    let raw: Entries = serde_json::from_str(&String::from_utf8_lossy(data))
        .expect("oracle: an accepted delta page is a JSON object");
    let entries = raw.value.map(|value| value.len());
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
