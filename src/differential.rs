//! The differential oracle of the matchers (issue 27): for a text and a query a reader builds
//! from what the text shows (whole visible words, or a piece of a run of a script written
//! without spaces, typed in another normalization form, case, or without accents, and never
//! holding the invisible characters the reader cannot see), every matcher finds the text —
//! the live scan's exact-token matcher, the Maildir scan's folded substring match, the evidence
//! signals, and the index — so none of them can answer `NOT_FOUND`. Compiled for the property
//! test below, `one_reading` and the fuzz target `text_differential` only.
//!
//! Layout: each matcher is one function from a [`Case`] (the text, the query and the query's
//! tokens) to `Ok` or the miss; the stateless ones are listed in [`MATCHERS`], so adding a
//! matcher is one function and one entry. The index has two paths: its analyzer (the tokens
//! `MailTokenizer` writes for the text must hold every token the index's query asks for), cheap
//! and checked on every case, and a round trip through a real [`TantivyIndex`] (put, commit,
//! search), which costs a segment (a dozen FSTs, a commit and a merge: milliseconds). A check
//! that runs per fuzz input holds one [`Matchers`] for the process, whose writer is opened once,
//! and asks for the round trip on a sample (`fuzzing::text_differential`); [`check`] opens a
//! writer for its one case and always takes the round trip.

use std::collections::HashSet;

use icu_properties::CodePointSetData;
use icu_properties::props::DefaultIgnorableCodePoint;
use tantivy::tokenizer::{TokenStream, Tokenizer};
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use crate::backends::model::{Filters, MessageSummary};
use crate::index::analyzer::{MailTokenizer, unrepresentable};
use crate::index::tantivy_index::{TantivyIndex, TantivyWriter};
use crate::index::{IndexQuery, IndexedMessage, TextIndex, TextIndexWriter};
use crate::search::matcher::TokenQuery;
use crate::tools::evidence::signals::{Haystack, Signals};

/// How the reader picks and types the query.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pick {
    /// The first visible word (modulo the number of words).
    pub(crate) first: usize,
    /// Further words after it (0–2).
    pub(crate) more: usize,
    /// A piece of a lone word written in an unspaced script: (start, length) in characters.
    pub(crate) piece: Option<(usize, usize)>,
    /// 0 as written, 1 NFC, 2 NFD, 3 NFKC.
    pub(crate) form: u8,
    /// 0 as written, 1 lower case, 2 upper case.
    pub(crate) case: u8,
    /// Typed without accents.
    pub(crate) no_marks: bool,
}

/// The query a reader types for `text` by `pick`, `None` when the text shows no word.
pub(crate) fn query_for(text: &str, pick: Pick) -> Option<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.is_empty() {
        return None;
    }
    let first = pick.first % words.len();
    let last = (first + pick.more % 3).min(words.len() - 1);
    let mut query = words[first..=last].join(" ");
    if let Some((start, len)) = pick.piece {
        let chars: Vec<char> = query.chars().collect();
        // Only a word wholly of precomposed unspaced characters (each one a character the
        // reader sees, not a jamo of a syllable) has pieces a reader sees as words of their own.
        if first == last
            && query.nfc().eq(query.chars())
            && chars
                .iter()
                .all(|c| c.is_alphanumeric() && crate::text::tokenize::is_unspaced(*c))
        {
            let start = start % chars.len();
            let len = 1 + len % (chars.len() - start);
            query = chars[start..start + len].iter().collect();
        }
    }
    // The reader cannot see, so cannot type, the invisible characters.
    let ignorable = CodePointSetData::new::<DefaultIgnorableCodePoint>();
    let visible: String = query.chars().filter(|c| !ignorable.contains(*c)).collect();
    let formed: String = match pick.form % 4 {
        1 => visible.nfc().collect(),
        2 => visible.nfd().collect(),
        3 => visible.nfkc().collect(),
        _ => visible,
    };
    let cased = match pick.case % 3 {
        1 => formed.to_lowercase(),
        // The iota subscript is read as a diacritic (see `text::normalize`): a reader typing
        // in capitals leaves it out rather than spelling it as a capital iota.
        2 => formed
            .nfd()
            .filter(|c| *c != '\u{345}')
            .collect::<String>()
            .to_uppercase(),
        _ => formed,
    };
    Some(if pick.no_marks {
        cased.nfd().filter(|c| !is_combining_mark(*c)).collect()
    } else {
        cased
    })
}

/// Checks every matcher on `text` against the reader's `query`, the index by a round trip;
/// `Err` names the one that missed. `index` is an index the check may write (it opens the
/// writer for this one check: a caller checking many cases holds a [`Matchers`] instead).
#[cfg(test)]
pub(crate) fn check(text: &str, query: &str, index: &TantivyIndex) -> Result<(), String> {
    let mut writer = index.writer().map_err(|e| e.to_string())?;
    check_paths(text, query, Some((index, &mut writer)))
}

/// Every path a check runs, set up once and reused by every case: the index and its one
/// writer (opening a writer starts its indexing threads and takes the index's lock).
pub(crate) struct Matchers {
    index: TantivyIndex,
    writer: TantivyWriter,
}

impl Matchers {
    /// Takes `index`, an index nothing else writes (it holds one message of the last case).
    pub(crate) fn new(index: TantivyIndex) -> Result<Self, String> {
        let writer = index.writer().map_err(|e| e.to_string())?;
        Ok(Self { index, writer })
    }

    /// Checks every matcher on `text` against the reader's `query`; `Err` names the one that
    /// missed. The index's analyzer is always checked; `round_trip` adds the real index (put,
    /// commit, search), the one path that costs milliseconds.
    pub(crate) fn check(
        &mut self,
        text: &str,
        query: &str,
        round_trip: bool,
    ) -> Result<(), String> {
        let index = round_trip.then_some((&self.index, &mut self.writer));
        check_paths(text, query, index)
    }
}

/// One case of the oracle: the text the reader sees, the query they typed, and the query's
/// tokens (every one must be found).
pub(crate) struct Case<'a> {
    pub(crate) text: &'a str,
    pub(crate) query: &'a str,
    pub(crate) tokens: Vec<String>,
}

/// A matcher: `Ok` when it finds the case's query in its text, else what it missed.
type Matcher = fn(&Case<'_>) -> Result<(), String>;

/// The matchers that need no state, in the order they are checked.
const MATCHERS: &[Matcher] = &[live_scan, maildir_scan, signals, index_analyzer];

fn check_paths(
    text: &str,
    query: &str,
    round_trip: Option<(&TantivyIndex, &mut TantivyWriter)>,
) -> Result<(), String> {
    let tokens = crate::text::query_tokens(query);
    if tokens.is_empty() {
        // No word: the engine answers `query_has_no_words`, never `NOT_FOUND`.
        return Ok(());
    }
    let case = Case {
        text,
        query,
        tokens,
    };
    for matcher in MATCHERS {
        matcher(&case)?;
    }
    match round_trip {
        Some((index, writer)) => index_round_trip(&case, index, writer),
        None => Ok(()),
    }
}

/// The live scan's exact-token matcher, over the text as a message body.
fn live_scan(case: &Case<'_>) -> Result<(), String> {
    if TokenQuery::new(case.query).matches(&summary(), Some(case.text)) {
        Ok(())
    } else {
        Err(format!(
            "live scan misses {:?} in {:?}",
            case.query, case.text
        ))
    }
}

/// The Maildir scan's folded substring match.
fn maildir_scan(case: &Case<'_>) -> Result<(), String> {
    let mut folded = String::new();
    crate::text::fold_into(case.text, &mut folded);
    match case.tokens.iter().find(|t| !folded.contains(t.as_str())) {
        None => Ok(()),
        Some(t) => Err(format!(
            "Maildir scan misses {t:?} of {:?} in {:?}",
            case.query, case.text
        )),
    }
}

/// The evidence signals, with the query as a keyword.
fn signals(case: &Case<'_>) -> Result<(), String> {
    let signals = Signals::new(&crate::tools::args::Signals {
        keywords: vec![case.query.to_owned()],
        ..Default::default()
    });
    let mut found = signals.none_found();
    signals.scan(&Haystack::new(case.text, false), &mut found);
    if found.iter().all(|f| *f) {
        Ok(())
    } else {
        Err(format!("signals miss {:?} in {:?}", case.query, case.text))
    }
}

/// The index's analyzer: the tokens `MailTokenizer` (the tokenizer the index registers) writes
/// for the text hold every token the index's query asks for — the query's tokens
/// (`crate::text::query_tokens`, as `TantivyIndex` builds its term queries), one term each,
/// matched exactly. What the round trip adds is tantivy's storage and the query's assembly,
/// which do not depend on the bytes of a token.
fn index_analyzer(case: &Case<'_>) -> Result<(), String> {
    if unrepresentable(case.query).is_some() {
        // The index says it cannot answer (`query_token_too_long`), never `NOT_FOUND`.
        return Ok(());
    }
    let mut indexed = HashSet::new();
    let mut stream = MailTokenizer.token_stream(case.text);
    while stream.advance() {
        indexed.insert(stream.token().text.clone());
    }
    match case.tokens.iter().find(|t| !indexed.contains(t.as_str())) {
        None => Ok(()),
        Some(t) => Err(format!(
            "index analyzer misses {t:?} of {:?} in {:?}",
            case.query, case.text
        )),
    }
}

/// The index itself: the text as the body of the only message of `index`, committed, then
/// searched for the query in its folder.
fn index_round_trip(
    case: &Case<'_>,
    index: &TantivyIndex,
    writer: &mut TantivyWriter,
) -> Result<(), String> {
    if unrepresentable(case.query).is_some() {
        // The index says it cannot answer (`query_token_too_long`), never `NOT_FOUND`.
        return Ok(());
    }
    writer
        .put(&IndexedMessage {
            summary: summary(),
            internet_message_id: None,
            thread_ids: Vec::new(),
            recipients: Vec::new(),
            body: case.text.to_owned(),
            attachment_text: String::new(),
            attachments_whole: true,
        })
        .map_err(|e| e.to_string())?;
    writer.commit().map_err(|e| e.to_string())?;
    let hits = index
        .search(&IndexQuery {
            folder_id: Some("INBOX".to_owned()),
            words: vec![case.query.to_owned()],
            filters: Filters::default(),
            limit: 1,
            order: None,
        })
        .map_err(|e| e.to_string())?;
    if hits.matched != 1 {
        return Err(format!("index misses {:?} in {:?}", case.query, case.text));
    }
    Ok(())
}

fn summary() -> MessageSummary {
    MessageSummary::blank("m", "INBOX")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::index::tantivy_index::tests::index;

    /// Words of the classes that broke the promise, and real-world spellings.
    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-zA-Z0-9]{1,12}",
            Just("Re\u{301}sume\u{301}".to_owned()),
            Just("Résumé".to_owned()),
            Just("Αθήνα".to_owned()),
            Just("ΟΔΟΣ".to_owned()),
            Just("ᾳδω".to_owned()),
            Just("İstanbul".to_owned()),
            Just("ıstanbul".to_owned()),
            Just("Straße".to_owned()),
            Just("ﬁnal".to_owned()),
            Just("ＩＮＶＯＩＣＥ".to_owned()),
            Just("con\u{ad}tract".to_owned()),
            Just("Kick\u{200b}off".to_owned()),
            Just("\u{feff}report\u{2060}".to_owned()),
            Just("私は東京都に住んでいます".to_owned()),
            Just("見積書を送付します".to_owned()),
            Just("서울에서".to_owned()),
            Just("\u{1109}\u{1165}\u{110b}\u{116e}\u{11af}".to_owned()),
            Just("ภาษาไทย".to_owned()),
            Just("ｶﾀｶﾅ".to_owned()),
            Just("2024年3月".to_owned()),
            Just("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855".to_owned()),
            Just("https://files.example.com/a/b?id=42".to_owned()),
            Just("PROP-1001".to_owned()),
            Just("Fatura_nº42".to_owned()),
            Just("naïve-café".to_owned()),
            Just("Ǆemal".to_owned()),
            "\\PC{1,8}",
        ]
    }

    fn pick() -> impl Strategy<Value = Pick> {
        (
            any::<usize>(),
            0usize..3,
            proptest::option::of((any::<usize>(), any::<usize>())),
            0u8..4,
            0u8..3,
            any::<bool>(),
        )
            .prop_map(|(first, more, piece, form, case, no_marks)| Pick {
                first,
                more,
                piece,
                form,
                case,
                no_marks,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        /// Whatever the text and however the reader types what it shows, every matcher finds
        /// it: the index whenever the live scan does, and neither says `NOT_FOUND`.
        #[test]
        fn every_matcher_finds_what_the_reader_sees(
            words in proptest::collection::vec(word(), 1..8),
            separators in proptest::collection::vec(
                proptest::sample::select(vec![" ", "\n", ", ", " - ", "\u{3000}", ". "]), 8),
            pick in pick(),
        ) {
            let mut text = String::new();
            for (i, w) in words.iter().enumerate() {
                if i > 0 {
                    text.push_str(separators[i % separators.len()]);
                }
                text.push_str(w);
            }
            if let Some(query) = query_for(&text, pick) {
                let (_tmp, index) = index();
                if let Err(miss) = check(&text, &query, &index) {
                    return Err(TestCaseError::fail(miss));
                }
            }
        }
    }

    /// One `Matchers` for many cases, as the fuzz target holds it: the writer is reused, and
    /// the analyzer path alone (`round_trip: false`) agrees with the round trip.
    #[test]
    fn one_set_of_matchers_checks_case_after_case() {
        let (_tmp, index) = index();
        let mut matchers = Matchers::new(index).expect("matchers");
        for (text, query) in [
            ("Re\u{301}sume\u{301} attached", "résumé"),
            ("Η Αθήνα", "ΑΘΗΝΑ"),
            ("私は東京都に住んでいます", "東京"),
            ("the con\u{ad}tract", "contract"),
        ] {
            for round_trip in [false, true, true] {
                matchers.check(text, query, round_trip).expect("found");
            }
        }
    }

    /// Every path can fail: a word the text does not hold is missed by each matcher, by the
    /// analyzer and by the round trip (through a reused writer, after a case it found).
    #[test]
    fn a_word_the_text_lacks_is_missed_by_every_path() {
        let case = Case {
            text: "the invoice is attached",
            query: "receipt",
            tokens: crate::text::query_tokens("receipt"),
        };
        for matcher in MATCHERS {
            assert!(matcher(&case).is_err());
        }
        let (_tmp, index) = index();
        let mut matchers = Matchers::new(index).expect("matchers");
        matchers
            .check(case.text, "invoice", true)
            .expect("a word it holds");
        let miss = matchers
            .check(case.text, case.query, true)
            .expect_err("a word it lacks");
        assert!(miss.starts_with("live scan misses"), "{miss}");
        let miss = index_round_trip(&case, &matchers.index, &mut matchers.writer)
            .expect_err("the index lacks it too");
        assert!(miss.starts_with("index misses"), "{miss}");
    }

    #[test]
    fn each_class_of_issue_27_is_found_by_every_matcher() {
        let (_tmp, index) = index();
        for (text, query) in [
            ("Re\u{301}sume\u{301} attached", "résumé"),
            ("Η Αθήνα", "ΑΘΗΝΑ"),
            ("İstanbul office", "istanbul"),
            ("私は東京都に住んでいます", "東京"),
            (
                "invoice e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                "invoice E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
            ),
            ("the con\u{ad}tract", "contract"),
            ("Kick\u{200b}off at 10", "kickoff"),
        ] {
            check(text, query, &index).expect("found");
        }
    }
}
