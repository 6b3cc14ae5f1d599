//! The differential oracle of the matchers (issue 27): for a text and a query a reader builds
//! from what the text shows (whole visible words, or a piece of a run of a script written
//! without spaces, typed in another normalization form, case, or without accents, and never
//! holding the invisible characters the reader cannot see), every matcher finds the text —
//! the live scan's exact-token matcher, the Maildir scan's folded substring match, the evidence
//! signals, and the index — so none of them can answer `NOT_FOUND`. Compiled for the property
//! test below and the fuzz target `text_differential` only.

use icu_properties::CodePointSetData;
use icu_properties::props::DefaultIgnorableCodePoint;
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use crate::backends::model::{Filters, MessageSummary};
use crate::index::tantivy_index::TantivyIndex;
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

/// Checks every matcher on `text` against the reader's `query`; `Err` names the one that
/// missed. `index` is an empty index the check may write.
pub(crate) fn check(text: &str, query: &str, index: &TantivyIndex) -> Result<(), String> {
    let tokens = crate::text::query_tokens(query);
    if tokens.is_empty() {
        // No word: the engine answers `query_has_no_words`, never `NOT_FOUND`.
        return Ok(());
    }
    let summary = summary();
    if !TokenQuery::new(query).matches(&summary, Some(text)) {
        return Err(format!("live scan misses {query:?} in {text:?}"));
    }
    let mut folded = String::new();
    crate::text::fold_into(text, &mut folded);
    if let Some(t) = tokens.iter().find(|t| !folded.contains(t.as_str())) {
        return Err(format!(
            "Maildir scan misses {t:?} of {query:?} in {text:?}"
        ));
    }
    let signals = Signals::new(&crate::tools::args::Signals {
        keywords: vec![query.to_owned()],
        ..Default::default()
    });
    let mut found = signals.none_found();
    signals.scan(&Haystack::new(text, false), &mut found);
    if !found.iter().all(|f| *f) {
        return Err(format!("signals miss {query:?} in {text:?}"));
    }
    if crate::index::analyzer::unrepresentable(query).is_some() {
        // The index says it cannot answer (`query_token_too_long`), never `NOT_FOUND`.
        return Ok(());
    }
    let mut writer = index.writer().map_err(|e| e.to_string())?;
    writer
        .put(&IndexedMessage {
            summary,
            internet_message_id: None,
            thread_ids: Vec::new(),
            recipients: Vec::new(),
            body: text.to_owned(),
            attachment_text: String::new(),
            attachments_whole: true,
        })
        .map_err(|e| e.to_string())?;
    writer.commit().map_err(|e| e.to_string())?;
    let hits = index
        .search(&IndexQuery {
            folder_id: Some("INBOX".to_owned()),
            words: vec![query.to_owned()],
            filters: Filters::default(),
            limit: 1,
            order: None,
        })
        .map_err(|e| e.to_string())?;
    if hits.matched != 1 {
        return Err(format!("index misses {query:?} in {text:?}"));
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
