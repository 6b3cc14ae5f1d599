//! A sound shortcut for the Maildir scan: decide from a message's raw bytes, without parsing it,
//! that it cannot match the query's words, so that a search over a large folder parses only the
//! messages that might match.
//!
//! Soundness (the only property that matters: a skipped message never matches): the matcher
//! looks for each folded word inside the folded text of the decoded subject, sender, attachment
//! names and body. Decoding can only produce a word the raw bytes do not hold when it changes
//! bytes: a transfer encoding (base64, quoted-printable, uuencode), an RFC 2047 encoded word, an
//! RFC 2231 parameter (`name*=`, `name*0=`), HTML (entities; tags joining text), a charset that
//! maps ASCII bytes to other characters (UTF-7, ISO-2022-*), or non-ASCII text that folds to
//! ASCII (`é` → `e`, fullwidth letters). A message holding any of these, or a Content-Type that
//! is not `text/` (it may be a part no matcher reads, or a multipart that cannot be split: gaps
//! the parsed view names), is always parsed; so is a message whose header block never ends (no
//! empty line), which the view names undecodable: a line of it that is no header field is text
//! no reader is shown. In every other message the decoded text is a substring-preserving copy of the raw bytes, so a
//! word absent from the raw bytes (ASCII case-insensitively) is absent from the decoded text.
//! The property test below holds the shortcut to the matcher on generated messages.

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

use super::scan::Words;

/// Raw-byte markers of content whose decoded text can differ from its bytes.
const MARKERS: &[&str] = &[
    "base64",
    "quoted-printable",
    "uuencode",
    "html",
    "=?",
    "*=",
    "*0",
    "*1",
    "*2",
    "*3",
    "*4",
    "*5",
    "*6",
    "*7",
    "*8",
    "*9",
    "content-type:",
    "charset=",
];
/// Index of `charset=` in [`MARKERS`]: its value decides.
const CHARSET: usize = MARKERS.len() - 1;
/// Index of `content-type:` in [`MARKERS`]: its value decides.
const CONTENT_TYPE: usize = MARKERS.len() - 2;
/// Charsets that decode ASCII bytes to the same characters.
const ASCII_SAFE_CHARSETS: &[&str] = &["us-ascii", "utf-8", "iso-8859-", "windows-125"];

/// The markers' automaton, built once for the process: it is the same for every query, and
/// building it (a DFA) cost more than prefiltering a small folder.
static MARKER_AUTOMATON: LazyLock<Option<AhoCorasick>> = LazyLock::new(|| {
    AhoCorasickBuilder::new()
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::Standard)
        .build(MARKERS)
        .ok()
});

/// The raw-byte check for one query.
pub(super) struct Prefilter {
    /// A word holds a non-ASCII character, which ASCII-only text can never fold to.
    non_ascii_word: bool,
    markers: &'static AhoCorasick,
}

impl Prefilter {
    /// `None` when the markers cannot be compiled (then every message is parsed).
    pub(super) fn new(words: &Words) -> Option<Self> {
        Some(Prefilter {
            non_ascii_word: words.0.iter().any(|w| !w.is_ascii()),
            markers: MARKER_AUTOMATON.as_ref()?,
        })
    }

    /// `false` only when `raw` cannot match every one of `words` (those `new` was given).
    pub(super) fn may_match(&self, words: &Words, raw: &[u8]) -> bool {
        if !raw.is_ascii() || !header_block_ends(raw) || self.decoding_may_differ(raw) {
            return true;
        }
        if self.non_ascii_word {
            return false;
        }
        words.all_occur(raw, 0..words.0.len()).unwrap_or(true)
    }

    fn decoding_may_differ(&self, raw: &[u8]) -> bool {
        self.markers
            .find_iter(raw)
            .any(|found| match found.pattern().as_usize() {
                CHARSET => !ascii_safe_charset(&raw[found.end()..]),
                CONTENT_TYPE => !textual_type(&raw[found.end()..]),
                _ => true,
            })
    }
}

/// Whether an empty line (`\n\n` or `\n\r\n`, as the parser splits) ends the header block.
fn header_block_ends(raw: &[u8]) -> bool {
    raw.iter()
        .enumerate()
        .any(|(at, &b)| b == b'\n' && matches!(&raw[at + 1..], [b'\n', ..] | [b'\r', b'\n', ..]))
}

/// Whether the Content-Type value at the start of `rest` is `text/…`. Any other part may be one
/// the parsed view names as a gap (issue 36): an unknown type, binary bytes, encrypted content,
/// or a multipart without a usable boundary, whose parts cannot be split. Such a message is
/// always parsed, so that a skipped message never hides a gap the index would report.
fn textual_type(rest: &[u8]) -> bool {
    let start = rest
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        .unwrap_or(rest.len());
    let value = &rest[start..];
    let kind = b"text/";
    value.len() >= kind.len() && value[..kind.len()].eq_ignore_ascii_case(kind)
}

/// Whether the charset value at the start of `rest` (optionally quoted) decodes ASCII as itself.
fn ascii_safe_charset(rest: &[u8]) -> bool {
    let rest = rest.strip_prefix(b"\"").unwrap_or(rest);
    ASCII_SAFE_CHARSETS.iter().any(|safe| {
        rest.len() >= safe.len() && rest[..safe.len()].eq_ignore_ascii_case(safe.as_bytes())
    })
}

/// Whether any of `words` may occur in the folded rendering of the HTML `source` (`true` when
/// unsure), without rendering it. Sound when the source is ASCII and holds no character
/// reference (`&`): the renderer's letters then all come from the source's text, joined across
/// tags, or from an image's `alt` attribute, and its own additions are list numbers and
/// punctuation. So a word absent, ASCII case-insensitively, from both the source and the source
/// with its tags cut out cannot be in the rendering. All-digit words are not judged: an ordered
/// list's number is a token of digits alone. (html2text 0.17 renders no form control.)
pub(super) fn html_may_hold(source: &str, words: &[&str]) -> bool {
    if words.is_empty()
        || !source.is_ascii()
        || source.contains('&')
        || words
            .iter()
            .any(|w| !w.is_ascii() || w.bytes().all(|b| b.is_ascii_digit()))
    {
        return true;
    }
    let lower = source.to_ascii_lowercase();
    let joined = without_tags(&lower);
    words
        .iter()
        .any(|w| lower.contains(w) || joined.contains(w))
}

/// `source` with every tag cut out and the text around it joined. A `<` opens a tag only before
/// a letter, `/`, `!` or `?` (as in HTML), and the cut ends at the first `>`: at or before the
/// tag's real end, so the cut never removes text a renderer would show.
fn without_tags(source: &str) -> String {
    let bytes = source.as_bytes();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < bytes.len() {
        let opens = bytes[i] == b'<'
            && bytes
                .get(i + 1)
                .is_some_and(|b| b.is_ascii_alphabetic() || matches!(b, b'/' | b'!' | b'?'));
        if opens && let Some(end) = source[i..].find('>') {
            i += end + 1;
            continue;
        }
        out.push(char::from(bytes[i]));
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::backends::maildir::scan::matches_parsed;

    /// `raw` through the prefilter of `query`.
    fn may_match(query: &str, raw: &[u8]) -> bool {
        let words = Words::new(query);
        Prefilter::new(&words)
            .expect("compiles")
            .may_match(&words, raw)
    }

    const PLAIN: &[u8] = b"From: Ana <ana@example.com>\r\nSubject: Quarterly figures\r\n\
Content-Type: text/plain; charset=utf-8\r\n\r\nThe invoice is attached.\r\n";

    #[test]
    fn plain_ascii_mail_is_skipped_only_when_a_word_is_absent() {
        assert!(may_match("INVOICE quarterly", PLAIN));
        assert!(may_match("voic", PLAIN), "words match inside tokens");
        assert!(!may_match("invoice zeppelin", PLAIN));
        assert!(
            !may_match("relatório", PLAIN),
            "ASCII text never folds to ó"
        );
    }

    #[test]
    fn every_decoding_that_changes_bytes_forces_a_parse() {
        let risky: [&[u8]; 8] = [
            b"Subject: =?utf-8?q?inv=6Fice?=\r\n\r\nx",
            b"Content-Transfer-Encoding: base64\r\n\r\naW52b2ljZQ==",
            b"Content-Transfer-Encoding: quoted-printable\r\n\r\ninv=\r\noice",
            b"Content-Type: text/html\r\n\r\ninv<b></b>oice &#105;",
            b"Content-Disposition: attachment; filename*=utf-8''inv%6Fice\r\n\r\nx",
            b"Content-Disposition: attachment; filename*0=inv; filename*1=oice\r\n\r\nx",
            b"Content-Type: text/plain; charset=utf-7\r\n\r\n+AGkAbgB2-oice",
            "Subject: ｉｎｖｏｉｃｅ\r\n\r\nrelatório".as_bytes(),
        ];
        for raw in risky {
            assert!(
                may_match("invoice", raw),
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
        assert!(!may_match(
            "invoice",
            b"Content-Type: text/plain; charset=\"US-ASCII\"\r\n\r\nx"
        ));
    }

    /// Issue 36 (found by the one-reading fuzz oracle): a header block without its empty line is
    /// a view the parser names undecodable (`Subject: hi\r\nhello world` shows nothing of its
    /// second line), so the scan must parse it and report the gap the index reports.
    #[test]
    fn a_header_block_that_never_ends_forces_a_parse() {
        for raw in [
            &b"\0"[..],
            b"Subject: hi",
            b"Subject: hi\r\nhello world\r\n",
        ] {
            assert!(
                may_match("invoice", raw),
                "{}",
                String::from_utf8_lossy(raw)
            );
            assert!(
                crate::mime::parse(raw).cuts.part.is_some(),
                "the view names the gap"
            );
        }
        assert!(!may_match("invoice", b"Subject: hi\r\n\r\nhello"));
        assert!(!may_match("invoice", b"Subject: hi\n\nhello"));
    }

    /// Ways a message can carry text whose bytes differ from its decoded characters, and the
    /// plain way; each is applied to generated text holding (or nearly holding) the words.
    fn encode(text: &str, subject: &str, how: u8) -> Vec<u8> {
        use base64::Engine as _;
        let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
        let head = |subject: &str, extra: &str| {
            format!("From: A <a@example.org>\r\nSubject: {subject}\r\n{extra}\r\n")
        };
        let out = match how {
            0 => head(subject, "Content-Type: text/plain; charset=us-ascii\r\n") + text,
            1 => head(subject, "Content-Transfer-Encoding: base64\r\n") + &b64(text),
            2 => {
                let qp = text.replace('o', "=6F").replace("vo", "v=\r\no");
                head(subject, "Content-Transfer-Encoding: quoted-printable\r\n") + &qp
            }
            3 => {
                let html = text.replace('i', "&#105;").replace("vo", "v<b></b>o");
                head(subject, "Content-Type: text/html\r\n") + &html
            }
            4 => head(&format!("=?utf-8?b?{}?=", b64(subject)), "") + "x",
            5 => {
                let wide: String = text
                    .chars()
                    .map(|c| {
                        if c.is_ascii_lowercase() {
                            char::from_u32(c as u32 - 0x61 + 0xFF41).unwrap_or(c)
                        } else {
                            c
                        }
                    })
                    .collect();
                head(subject, "Content-Type: text/plain; charset=utf-8\r\n") + &wide
            }
            6 => {
                head(subject, "Content-Type: text/plain; charset=utf-8\r\n")
                    + &text.replace('e', "é")
            }
            8 => {
                // Latin-1 bytes under a Latin-1 label: 8-bit, not UTF-8.
                let mut out =
                    head(subject, "Content-Type: text/plain; charset=iso-8859-1\r\n").into_bytes();
                out.extend(text.bytes().map(|b| if b == b'e' { 0xE9 } else { b }));
                return out;
            }
            9 => {
                head(subject, "Content-Type: text/plain; charset=us-ascii\r\n")
                    + &text.replace('o', "ö")
            }
            10 => format!(
                "From: Zoë <{}@example.org>\r\nSubject: {subject}\r\n\r\nnaïve",
                text.replace(' ', ".")
            ),
            12 | 13 => {
                // Issue 36: a body-place part of a type no matcher reads (a gap the parsed view
                // names), or unnamed octet-stream text (read into the body): plain ASCII both.
                let kind = if how == 12 {
                    "application/x-unknown"
                } else {
                    "application/octet-stream"
                };
                head(subject, "Content-Type: multipart/mixed; boundary=b\r\n")
                    + &format!(
                        "--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b\r\n\
                         Content-Type: {kind}\r\n\r\n{text}\r\n--b--\r\n"
                    )
            }
            11 => {
                // UTF-8 bytes under a Latin-1 label: read as Latin-1, "ó" becomes "Ã³", which
                // folds to "a3" — a word the bytes read as UTF-8 never fold to.
                head(subject, "Content-Type: text/plain; charset=iso-8859-1\r\n")
                    + &text.replace('o', "ó")
            }
            _ => {
                let name = format!("filename*=utf-8''{}", text.replace('o', "%6F"));
                head(subject, "Content-Type: multipart/mixed; boundary=b\r\n")
                    + &format!(
                        "--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b\r\n\
                         Content-Type: application/pdf\r\nContent-Disposition: attachment; \
                         {name}\r\n\r\npdf\r\n--b--\r\n"
                    )
            }
        };
        out.into_bytes()
    }

    fn message() -> impl Strategy<Value = Vec<u8>> {
        let word = prop::sample::select(vec![
            "invoice", "report", "notes", "zeppelin", "in", "voice",
        ]);
        (
            prop::collection::vec(word.clone(), 1..4),
            prop::collection::vec(word, 0..8),
            0u8..14,
        )
            .prop_map(|(subject, body, how)| encode(&body.join(" "), &subject.join(" "), how))
    }

    proptest! {
        // Fourteen encodings × five queries: enough cases that each pairing is met many times.
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// The shortcut is sound: whatever the message, a skipped one never matches.
        #[test]
        fn a_skipped_message_never_matches(
            raw in message(),
            query in prop::sample::select(vec!["invoice", "report notes", "oice", "zeppelin", "inva3ice"]),
        ) {
            let words = Words::new(query);
            let filter = Prefilter::new(&words).expect("compiles");
            if !filter.may_match(&words, &raw) {
                prop_assert!(!matches_parsed(&words, &raw), "{}", String::from_utf8_lossy(&raw));
                // Nor hides a gap: a skipped message is wholly readable, as the index sees it.
                prop_assert_eq!(
                    crate::mime::parse(&raw).cuts.part,
                    None,
                    "{}",
                    String::from_utf8_lossy(&raw)
                );
            }
        }
    }

    /// HTML sources built to hide words from a naive reading: joined across tags, in an alt
    /// text, behind a stray `<`, in entities, in non-ASCII, in list numbers.
    fn html_source(words: &[&str], how: u8) -> String {
        let text = words.join(" ");
        match how {
            0 => format!("<p>{text}</p>"),
            1 => format!(
                "<p>{}</p>",
                text.replace("vo", "v<b></b>o")
                    .replace("re", "r<span class=x>e")
            ),
            2 => format!("<img alt=\"{text}\" src=x>"),
            3 => format!("<p>a < b {text} > c</p>"),
            4 => format!("<p>{}</p>", text.replace('o', "&#111;")),
            5 => format!("<p>{}</p>", text.replace('e', "é")),
            6 => format!("<ol><li>{text}</li></ol>"),
            7 => format!("<!-- x > y --><p title=\"a>b\">{text}</p>"),
            _ => format!(
                "<style>p{{}}</style><script>x</script><p>{}</p>",
                text.to_uppercase()
            ),
        }
    }

    proptest! {
        /// The HTML gate is sound: whenever it says no word can be in the rendering, the
        /// rendering (what the search would match) holds none of them.
        #[test]
        fn the_html_gate_never_hides_a_word_the_rendering_holds(
            body in prop::collection::vec(prop::sample::select(vec!["invoice", "report", "in", "voice", "notes"]), 0..6),
            how in 0u8..9,
            query in prop::sample::select(vec!["invoice", "report", "oice", "zeppelin", "1", "in1"]),
        ) {
            let source = html_source(&body, how);
            let words = Words::new(query);
            let refs: Vec<&str> = words.0.iter().map(String::as_str).collect();
            if !html_may_hold(&source, &refs) {
                let mut folded = String::new();
                crate::text::fold_into(&crate::mime::html::to_text(&source, 100_000), &mut folded);
                for w in &refs {
                    prop_assert!(!folded.contains(w), "{source}");
                }
            }
        }
    }

    #[test]
    fn the_html_gate_reads_tags_as_html_does() {
        assert_eq!(without_tags("a<b>c</b> d < e <!-- f > g"), "ac d < e  g");
        assert_eq!(without_tags("x <unclosed"), "x <unclosed");
        assert!(!html_may_hold("<p>nothing here</p>", &["invoice"]));
        assert!(html_may_hold("<p>inv<i>oice</i></p>", &["invoice"]));
    }
}
