//! Normalization: the characters a reader sees, made comparable. Each character of a text goes
//! through compatibility decomposition (NFKD: ligatures, full-width and circled forms become
//! their plain letters), full Unicode case folding (`ß` → `ss`, final sigma → sigma, `İ` → `i`),
//! decomposition again (a folding can yield a decomposable
//! character), and loses its combining marks (accents, tonos, dakuten) and every default-ignorable code point (soft hyphen, zero-width
//! space and joiners, word joiner, byte-order mark, variation selectors, bidi controls). Those
//! are invisible: dropping them *inside* a word, never treating them as a break, is what lets
//! `con\u{ad}tract` match `contract`. Hangul syllables stay composed (conjoining jamo written
//! decomposed, as NFD text from macOS holds them, are composed back), so Korean matches syllable
//! by syllable like the other unspaced scripts.
//!
//! Invariant: normalizing is idempotent (the normalized text normalizes to itself), so a query
//! and a text normalize alike whichever was normalized first; the property tests hold it.

use icu_casemap::CaseMapperBorrowed;
use icu_properties::CodePointSetDataBorrowed;
use icu_properties::props::DefaultIgnorableCodePoint;
use unicode_normalization::char::{compose, decompose_compatible, is_combining_mark};

/// Default-ignorable code points (Unicode's `Default_Ignorable_Code_Point`).
const IGNORABLE: CodePointSetDataBorrowed<'static> =
    icu_properties::CodePointSetData::new::<DefaultIgnorableCodePoint>();
/// Full case folding (Unicode `CaseFolding.txt`, status C and F).
const CASE: CaseMapperBorrowed<'static> = CaseMapperBorrowed::new();

/// Feeds the normalized characters of `text` to `sink`, each with the byte range of the source
/// character it came from (a composed Hangul syllable spans its jamo).
pub(crate) fn normalize(text: &str, sink: impl FnMut(char, usize, usize)) {
    let mut out = Composer {
        pending: None,
        sink,
    };
    for (at, ch) in text.char_indices() {
        let end = at + ch.len_utf8();
        if ch.is_ascii() {
            // ASCII is its own NFKD, has no marks or ignorables, and folds to lower case.
            out.push(ch.to_ascii_lowercase(), at, end);
        } else if is_hangul_syllable(ch) {
            // Its decomposition is canonical jamo, which composing gives back: skip the round.
            out.push(ch, at, end);
        } else {
            each_normalized(ch, &mut |c| out.push(c, at, end));
        }
    }
    out.finish();
}

/// The normalized form of `text` as a string (what every matcher compares).
pub(crate) fn normalized(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    normalize(text, |c, _, _| out.push(c));
    out
}

/// One non-ASCII character's normalized characters (none for a mark or an ignorable). Marks go
/// before folding: the iota subscript (a mark that folds to a letter) is a diacritic a reader
/// leaves out when typing without accents, so `ᾳ` is `α` (its upper case `ΑΙ` is the one
/// spelling this does not join).
fn each_normalized(ch: char, emit: &mut dyn FnMut(char)) {
    decompose_compatible(ch, |part| {
        if dropped(part) {
            return;
        }
        if part.is_ascii() {
            emit(part.to_ascii_lowercase());
            return;
        }
        let mut buf = [0u8; 4];
        let folded = CASE.fold_string(part.encode_utf8(&mut buf));
        for f in folded.chars() {
            decompose_compatible(f, |c| {
                if !dropped(c) {
                    emit(dotless(c));
                }
            });
        }
    });
}

/// Marks and invisible characters: removed, never a break.
fn dropped(c: char) -> bool {
    is_combining_mark(c) || IGNORABLE.contains(c)
}

/// Dotless `ı` folds to itself; a reader typing `istanbul` for `ıstanbul` (or `İstanbul`,
/// which folds to `i` + a dot that is dropped) means the same word.
fn dotless(c: char) -> char {
    if c == '\u{131}' { 'i' } else { c }
}

fn is_hangul_syllable(c: char) -> bool {
    ('\u{AC00}'..='\u{D7A3}').contains(&c)
}

/// A leading consonant, or a syllable without a trailing one: what a following jamo may join.
fn may_take_jamo(c: char) -> bool {
    ('\u{1100}'..='\u{1112}').contains(&c)
        || (is_hangul_syllable(c) && (u32::from(c) - 0xAC00) % 28 == 0)
}

/// Composes conjoining jamo into Hangul syllables as they pass (canonical composition, which
/// with every mark already dropped composes nothing else).
struct Composer<F: FnMut(char, usize, usize)> {
    pending: Option<(char, usize, usize)>,
    sink: F,
}

impl<F: FnMut(char, usize, usize)> Composer<F> {
    fn push(&mut self, c: char, at: usize, end: usize) {
        if let Some((p, p_at, p_end)) = self.pending.take() {
            if let Some(joined) = compose(p, c).filter(|j| is_hangul_syllable(*j)) {
                if may_take_jamo(joined) {
                    self.pending = Some((joined, p_at, end));
                } else {
                    (self.sink)(joined, p_at, end);
                }
                return;
            }
            (self.sink)(p, p_at, p_end);
        }
        if may_take_jamo(c) {
            self.pending = Some((c, at, end));
        } else {
            (self.sink)(c, at, end);
        }
    }

    fn finish(&mut self) {
        if let Some((p, at, end)) = self.pending.take() {
            (self.sink)(p, at, end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_reader_sees_is_what_compares() {
        for (seen, typed) in [
            ("Re\u{301}sume\u{301}", "résumé"),
            ("RÉSUMÉ", "resume"),
            ("Ἀθῆναι", "αθηναι"),
            ("ΟΔΟΣ", "οδος"),
            ("οδός", "οδοσ"),
            ("İstanbul", "istanbul"),
            ("ıstanbul", "istanbul"),
            ("Straße", "strasse"),
            ("STRAẞE", "strasse"),
            ("ﬁnal ＩＮＶＯＩＣＥ", "final invoice"),
            ("con\u{ad}tract", "contract"),
            ("Kick\u{200b}off", "kickoff"),
            ("\u{feff}word\u{2060}s\u{200d}", "words"),
            ("\u{1112}\u{1161}\u{11AB}\u{1100}\u{116E}\u{11A8}", "한국"),
            ("ｶﾀｶﾅ", "カタカナ"),
            ("ᾳ", "α"),
        ] {
            assert_eq!(normalized(seen), normalized(typed), "{seen:?} vs {typed:?}");
        }
        assert_eq!(normalized("Straße"), "strasse");
        assert_eq!(normalized("한국어"), "한국어");
    }

    #[test]
    fn ranges_point_at_the_source_characters() {
        let text = "a\u{ad}É\u{1100}\u{1161}";
        let mut seen = Vec::new();
        normalize(text, |c, at, end| seen.push((c, &text[at..end])));
        assert_eq!(
            seen,
            vec![('a', "a"), ('e', "É"), ('가', "\u{1100}\u{1161}")]
        );
    }

    proptest::proptest! {
        /// Normalizing twice changes nothing: a query and a text compare alike whichever side
        /// was normalized before.
        #[test]
        fn normalizing_is_idempotent(text in "\\PC{0,40}") {
            let once = normalized(&text);
            proptest::prop_assert_eq!(normalized(&once), once);
        }
    }
}
