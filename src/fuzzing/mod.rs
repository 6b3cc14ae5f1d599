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
//! Layout: one file per family of targets, re-exported here so every target calls
//! `mailgate::fuzzing::<target>`: the MIME view in `mime`, the Graph parsers in `graph`,
//! attachment extraction in `extract`, the write and handoff families (which only forward to
//! oracles beside the code they check) in [`write`]; the small targets (IMAP, HTTP, embeddings,
//! the MCP surface, the text differential) and the helpers the files share stay here.
//!
//! Who may call it: the fuzz targets in `fuzz/` only.

use std::path::Path;
use std::sync::{Mutex, Once, OnceLock};

mod extract;
mod graph;
mod mime;
pub mod write;

pub use extract::{extract_ooxml, extract_pdf, extract_zip};
pub use graph::{graph_delta, graph_wire};
pub use mime::{html_text, mime_maildir, mime_memory};

const KIB: u64 = 1024;

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
// http_oauth
// ----------------------------------------------------------------------------------------------

/// Bytes → the OAuth resource server's token header rules and signature check, and its
/// `Authorization` parser (`transport::http::oauth::fuzz`); the first byte picks which.
///
/// Oracles, beyond "no panic": no HMAC or `none` header passes; nothing verifies under a key
/// whose private half was thrown away; an extracted token is the trimmed tail of one `Bearer`
/// value.
pub fn http_oauth(data: &[u8]) {
    crate::transport::http::oauth::fuzz(data);
}

// ----------------------------------------------------------------------------------------------
// oauth_wire
// ----------------------------------------------------------------------------------------------

/// Bytes → an authorization server's answers (issue 37, `delegated::wire::fuzz`): the first
/// byte picks the parser (token endpoint, device authorization endpoint, OIDC discovery), the
/// status and the content type; the rest is the body.
///
/// Oracles, beyond "no panic": deterministic; an accepted grant's access token is non-empty,
/// visible ASCII and the body's own, of type Bearer, with a lifetime in bounds; every accepted
/// URI is https or loopback http; a refusal's description is bounded and without control
/// characters; no accepted outcome's `Debug` shows or depends on a token or code.
pub fn oauth_wire(data: &[u8]) {
    crate::delegated::wire::fuzz(data);
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

/// Arbitrary bytes and a reader's query built from what they show → every matcher. The first
/// six bytes pick the query (which visible words, a piece of an unspaced run, the normalization
/// form, the case, accents left out) and how the rest is read:
///
/// * as text (UTF-8, lossily; bit `0x20` of the sixth byte clear): the live scan, the Maildir
///   scan's folded match, the evidence signals, the index's analyzer and the index itself each
///   find the query ([`crate::differential::Matchers::check`]), so none can answer `NOT_FOUND`
///   for a word the mail shows;
/// * as a raw message (the bit set): issue 36's one-extraction rule
///   ([`crate::one_reading::check_message`]): a query built from the body `get_message` shows
///   is found by every matcher of that text and by the Maildir scan over the raw bytes (its
///   prefilter and HTML-gated parse); a word no byte holds is found by none; the prefilter never
///   skips a message whose view names a part it could not read.
///
/// One bit, not both checks on every input: the message check is a few parses, the text check a
/// fraction of one, and a mutation that flips the bit moves an input to the other reading.
/// The round trip through a real index ([`index_round_trip`]) costs a commit of a segment, a
/// hundred times the rest, and runs on a sample of the inputs.
///
/// `scratch` is the process's private scratch directory (the same on every call); the index
/// lives in `scratch/text_differential/`, made on the first call with its one writer.
pub fn text_differential(scratch: &Path, data: &[u8]) {
    use crate::differential::{Matchers, Pick, query_for};
    use crate::index::tantivy_index::TantivyIndex;

    /// One index and writer for the process: each round trip replaces the one message it holds.
    static MATCHERS: OnceLock<Mutex<Matchers>> = OnceLock::new();
    let Some((head, rest)) = data.split_first_chunk::<6>() else {
        return;
    };
    let rest = &rest[..rest.len().min(4_096)];
    let pick = Pick {
        first: usize::from(head[0]),
        more: usize::from(head[1]),
        piece: (head[2] & 1 == 1).then_some((usize::from(head[3]), usize::from(head[4]))),
        form: head[5] & 3,
        case: (head[5] >> 2) % 3,
        no_marks: head[5] & 0x10 != 0,
    };
    let as_message = head[5] & 0x20 != 0;
    let text = String::from_utf8_lossy(rest);
    let query = if as_message {
        None
    } else {
        match query_for(&text, pick) {
            Some(query) => Some(query),
            None => return,
        }
    };
    let matchers = MATCHERS.get_or_init(|| {
        let root = cap_std::fs::Dir::open_ambient_dir(scratch, cap_std::ambient_authority())
            .expect("invariant: the scratch directory opens");
        let _ = root.create_dir("text_differential");
        let dir = root
            .open_dir("text_differential")
            .expect("invariant: the index directory opens");
        let index = TantivyIndex::open(crate::index::capdir::CapDirectory::new(dir), true)
            .expect("invariant: an index can be created");
        Mutex::new(Matchers::new(index).expect("invariant: the index's writer opens"))
    });
    let mut matchers = matchers
        .lock()
        .expect("invariant: the matchers' lock is never poisoned");
    let round_trip = index_round_trip(data);
    let checked = match &query {
        Some(query) => matchers.check(&text, query, round_trip),
        None => {
            contain_mail_parser_panics();
            crate::one_reading::check_message(rest, pick, &mut matchers, round_trip)
        }
    };
    if let Err(miss) = checked {
        panic!("oracle: {miss}");
    }
}

/// After the process's first input (so that a crash file replayed alone takes it), one input in
/// this many, picked by a hash of its bytes, takes the index round trip. A round trip makes and
/// commits a segment (a dozen FSTs, fsyncs, a merge): 8 ms of CPU and 19 ms of wall time in the
/// release build, 50 to 100 ms under AddressSanitizer, against a fraction of a millisecond for
/// everything else an input gets. At one in 1,024 it is under a tenth of the target's time and
/// still runs hundreds of times in a ten-minute campaign. What it adds to the analyzer check,
/// which every input gets, is tantivy's storage of the terms and `TantivyIndex`'s query
/// assembly, neither of which depends on the bytes of a token, so a sample reaches them as well
/// as every input would.
const ROUND_TRIP_ONE_IN: u64 = 1_024;

/// Whether this input takes the index round trip: the process's first, or one its hash picks
/// ([`ROUND_TRIP_ONE_IN`]).
fn index_round_trip(data: &[u8]) -> bool {
    static FIRST: Once = Once::new();
    sampled(&FIRST, data, ROUND_TRIP_ONE_IN)
}

/// Whether an input takes a costly check of its target: the first of the process (`first` is
/// that target's own, so that a crash file replayed alone takes it), or one in `one_in` picked
/// by a hash of its bytes. The pick depends on the bytes only, so an input that failed a check
/// fails it again when replayed, alone or in a corpus.
fn sampled(first: &Once, data: &[u8], one_in: u64) -> bool {
    let mut is_first = false;
    first.call_once(|| is_first = true);
    // FNV-1a: cheap, and any byte changes the pick.
    let hash = data.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    is_first || hash % one_in == 0
}
