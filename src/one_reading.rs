//! The one-reading oracle of issue 36: for raw message bytes, the text `get_message` shows is
//! the text every matcher searches, and nothing a message says is silently lost. Three checks:
//!
//! * a query a reader builds from the shown body (`differential::query_for`) is found by every
//!   matcher of that text (`differential::check`: the engine's fallback matcher, the folded
//!   Maildir match, the evidence signals, the index) and by the Maildir scan over the raw bytes
//!   (its prefilter and HTML-gated parse, [`scan_verdict`]);
//! * a word the bytes nowhere hold is matched by none of them, and the scan's prefilter never
//!   skips a message whose view names a part it could not read;
//! * (the property test) a word written into any broken-but-real MIME shape is either in the
//!   shown body or the view names a gap ([`crate::mime::Cuts`]): never missing unannounced.
//!
//! Compiled for the tests and the fuzz target `text_differential` only (which gives it the raw
//! message bytes of half its inputs).

use crate::backends::maildir::scan_verdict;
use crate::differential::{Matchers, Pick, query_for};
use crate::mime;

/// A word no generated or fuzzed message is meant to hold; checked against the bytes first.
const ABSENT: &str = "qzvxjwabsentword";

/// Checks the one reading of `raw` with the reader's `pick`; `Err` names the path that
/// disagreed. `matchers` holds the index the check may write; `round_trip` as in
/// [`Matchers::check`] (the real index costs milliseconds, so a caller with many inputs samples
/// it).
pub(crate) fn check_message(
    raw: &[u8],
    pick: Pick,
    matchers: &mut Matchers,
    round_trip: bool,
) -> Result<(), String> {
    let parsed = mime::parse(raw);
    let shown = parsed.body_text.as_str();
    if let Some(query) = query_for(shown, pick)
        && !crate::text::query_tokens(&query).is_empty()
    {
        matchers.check(shown, &query, round_trip)?;
        let (_, matched) = scan_verdict(raw, &query);
        if !matched {
            return Err(format!(
                "the Maildir scan misses {query:?}, which get_message shows in {shown:?}"
            ));
        }
    }
    let holds_absent = raw
        .windows(ABSENT.len())
        .any(|w| w.eq_ignore_ascii_case(ABSENT.as_bytes()))
        || !raw.is_ascii();
    if !holds_absent {
        let (passed, matched) = scan_verdict(raw, ABSENT);
        if matched {
            return Err(format!(
                "the Maildir scan finds {ABSENT:?}, which no byte holds"
            ));
        }
        if !passed && parsed.cuts.part.is_some() {
            return Err(format!(
                "the prefilter skipped a message whose view names a part gap ({:?})",
                parsed.cuts.part
            ));
        }
        let summary = crate::backends::model::MessageSummary::blank("m", "INBOX");
        if crate::search::matcher::TokenQuery::new(ABSENT).matches(&summary, Some(shown)) {
            return Err(format!(
                "the fallback matcher finds {ABSENT:?} in {shown:?}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use proptest::prelude::*;

    use super::*;
    use crate::index::tantivy_index::tests::index;

    /// The Content-Types real mailers write, broken or not, for the part holding the word.
    const TYPES: &[&str] = &[
        "text/plain",
        "text",
        "text/",
        "plain",
        "text/plain/extra",
        "@@@",
        ";;;",
        "",
        "text/x-log",
        "text/enriched",
        "message/delivery-status",
        "text/plain; charset=x-unknown-7",
        "text/plain; charset=iso-8859-1",
        "application/octet-stream",
        "application/x-unknown",
        "text/html",
    ];

    /// How the part's body is transfer-encoded.
    #[derive(Clone, Copy, Debug)]
    enum Coding {
        None,
        Base64,
        /// Base64 cut `n` characters short of its end (padding included).
        Base64Cut(usize),
        /// Quoted-printable with a soft line break `n` characters into every word.
        SoftBreaks(usize),
    }

    /// Where the part sits.
    #[derive(Clone, Copy, Debug)]
    enum Frame {
        Alone,
        /// In multipart/mixed after an intro, the boundary also written inside the text.
        Mixed,
        /// In multipart/mixed without headers of its own (then it is text/plain).
        Headless,
        /// A multipart/mixed Content-Type with no boundary parameter.
        NoBoundary,
    }

    fn encode(text: &str, coding: Coding) -> (String, String) {
        match coding {
            Coding::None => (String::new(), text.to_owned()),
            Coding::Base64 | Coding::Base64Cut(_) => {
                let mut b64 = base64::engine::general_purpose::STANDARD.encode(text);
                if let Coding::Base64Cut(n) = coding {
                    b64.truncate(b64.len().saturating_sub(1 + n % 3));
                }
                let lines: Vec<String> = b64
                    .as_bytes()
                    .chunks(76)
                    .map(|c| String::from_utf8_lossy(c).into_owned())
                    .collect();
                (
                    "Content-Transfer-Encoding: base64\r\n".to_owned(),
                    lines.join("\r\n"),
                )
            }
            Coding::SoftBreaks(n) => {
                let broken: Vec<String> = text
                    .split(' ')
                    .map(|w| {
                        let at = 1 + n % w.len().max(2);
                        if w.is_ascii() && at < w.len() {
                            format!("{}=\r\n{}", &w[..at], &w[at..])
                        } else {
                            w.to_owned()
                        }
                    })
                    .collect();
                (
                    "Content-Transfer-Encoding: quoted-printable\r\n".to_owned(),
                    broken.join(" "),
                )
            }
        }
    }

    fn message(ty: &str, coding: Coding, frame: Frame, text: &str) -> Vec<u8> {
        let (cte, body) = encode(text, coding);
        let head = "From: Ana <ana@example.com>\r\nSubject: weekly notes\r\n";
        let part = format!("Content-Type: {ty}\r\n{cte}\r\n{body}\r\n");
        let raw = match frame {
            Frame::Alone => format!("{head}{part}"),
            Frame::Mixed => format!(
                "{head}Content-Type: multipart/mixed; boundary=\"frontier\"\r\n\r\n\
                 --frontier\r\nContent-Type: text/plain\r\n\r\nsee the --frontier notes\r\n\
                 --frontierland below\r\n--frontier\r\n{part}--frontier--\r\n"
            ),
            // No headers, so no transfer encoding either: the text as it is.
            Frame::Headless => format!(
                "{head}Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\n\r\n\
                 {text}\r\n--b--\r\n"
            ),
            Frame::NoBoundary => {
                format!("{head}Content-Type: multipart/mixed\r\n\r\n--x\r\n{part}--x--\r\n")
            }
        };
        raw.into_bytes()
    }

    fn shape() -> impl Strategy<Value = (Vec<u8>, String)> {
        let word = prop::sample::select(vec![
            "budget", "invoice", "kickoff", "ledger", "café", "Straße", "delta", "report",
        ]);
        (
            prop::sample::select(TYPES.to_vec()),
            prop_oneof![
                Just(Coding::None),
                Just(Coding::Base64),
                (0usize..3).prop_map(Coding::Base64Cut),
                (0usize..6).prop_map(Coding::SoftBreaks),
            ],
            prop_oneof![
                Just(Frame::Alone),
                Just(Frame::Mixed),
                Just(Frame::Headless),
                Just(Frame::NoBoundary),
            ],
            prop::collection::vec(word, 1..12),
            0usize..12,
        )
            .prop_map(|(ty, coding, frame, mut words, at)| {
                // The word to find, somewhere in the text (the end included).
                let at = at % (words.len() + 1);
                words.insert(at, "kumquat");
                (
                    message(ty, coding, frame, &words.join(" ")),
                    "kumquat".to_owned(),
                )
            })
    }

    thread_local! {
        /// One index and writer for every case of the property test, as the fuzz target holds
        /// them (a writer per case is most of a case's time); the directory lives as long.
        static MATCHERS: std::cell::RefCell<(tempfile::TempDir, Matchers)> = {
            let (tmp, index) = index();
            std::cell::RefCell::new((tmp, Matchers::new(index).expect("matchers")))
        };
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// A word written into any of these shapes is in the body a reader is shown, or the
        /// view names why not (a part gap, a parser cut): never lost unannounced; and every
        /// path reads the shape as `get_message` shows it.
        #[test]
        fn a_word_in_any_broken_shape_is_shown_or_its_gap_named(
            (raw, word) in shape(),
            first in 0usize..16,
            form in 0u8..4,
            case in 0u8..3,
        ) {
            let parsed = mime::parse(&raw);
            let shown = crate::text::tokens(&parsed.body_text);
            let gap = crate::backends::model::ContentGap::of(parsed.cuts);
            prop_assert!(
                shown.iter().any(|t| t == &word) || gap.is_some(),
                "{:?} lost without a gap from {}",
                word,
                String::from_utf8_lossy(&raw)
            );
            let pick = Pick { first, more: 0, piece: None, form, case, no_marks: false };
            let checked = MATCHERS.with_borrow_mut(|(_, m)| check_message(&raw, pick, m, true));
            prop_assert_eq!(checked, Ok(()), "{}", String::from_utf8_lossy(&raw));
        }
    }

    /// The committed corpus (`scripts/gen-mime-shapes.py`) through the same check.
    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "the test reads the committed corpus with std::fs"
    )]
    fn the_corpus_of_issue_36_reads_as_one() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mime-shapes");
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("shapes.json")).expect("manifest"))
                .expect("manifest parses");
        let shapes = manifest["shapes"].as_array().expect("shapes");
        assert!(shapes.len() >= 20);
        for shape in shapes {
            let file = shape["file"].as_str().expect("file");
            let raw = std::fs::read(dir.join(file)).expect("shape");
            let (_tmp, index) = index();
            let mut matchers = Matchers::new(index).expect("matchers");
            for first in 0..8 {
                let pick = Pick {
                    first,
                    more: first % 3,
                    piece: None,
                    form: 0,
                    case: 1,
                    no_marks: false,
                };
                assert_eq!(
                    check_message(&raw, pick, &mut matchers, true),
                    Ok(()),
                    "{file}"
                );
            }
        }
    }
}
