//! Tokenization of normalized text: a token is a maximal run of alphanumeric characters of one
//! kind, spaced or unspaced. Scripts written without spaces between words (Han, Hiragana,
//! Katakana, Hangul, Thai, Lao, Khmer, Myanmar) have no word boundaries a tokenizer can see, so
//! their runs are cut into overlapping pairs of characters (bigrams): a text yields every
//! character and every adjacent pair of its runs, a query every adjacent pair of its runs (a
//! single character: itself), and a word found inside an unspaced run is then found by its pairs
//! wherever it sits in the run. A switch between a spaced and an unspaced character ends a token
//! (`2024年` is `2024` and `年`).

use icu_properties::props::Script;
use icu_properties::script::ScriptWithExtensionsBorrowed;

use super::normalize::normalize;

/// How a text is cut into tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A text searched: unspaced runs give every character and every adjacent pair.
    Document,
    /// A query: unspaced runs give their adjacent pairs (a run of one character: itself).
    Query,
    /// Contiguous matching (the evidence signals): unspaced characters one by one.
    Units,
}

/// The scripts written without spaces between words.
const UNSPACED: [Script; 8] = [
    Script::Han,
    Script::Hiragana,
    Script::Katakana,
    Script::Hangul,
    Script::Thai,
    Script::Lao,
    Script::Khmer,
    Script::Myanmar,
];

/// Whether `c` (alphanumeric, normalized) belongs to a script written without spaces, by its
/// script extensions (so `ー` and `々`, shared by Hiragana and Katakana, count).
pub(crate) fn is_unspaced(c: char) -> bool {
    if c.is_ascii() {
        return false;
    }
    let scripts = ScriptWithExtensionsBorrowed::new();
    UNSPACED.iter().any(|s| scripts.has_script(c, *s))
}

/// Feeds every token of `text` to `sink` with the byte range of the source it came from.
pub(crate) fn each_token(text: &str, mode: Mode, sink: impl FnMut(&str, usize, usize)) {
    let mut run = Run {
        mode,
        word: String::new(),
        start: 0,
        end: 0,
        unspaced: None,
        chars: Vec::new(),
        sink,
    };
    normalize(text, |c, at, end| run.push(c, at, end));
    run.close();
}

/// The token being read.
struct Run<F: FnMut(&str, usize, usize)> {
    mode: Mode,
    /// The spaced run so far.
    word: String,
    start: usize,
    end: usize,
    /// `None` between runs; else whether the run is of unspaced characters.
    unspaced: Option<bool>,
    /// The unspaced run so far, with each character's source range.
    chars: Vec<(char, usize, usize)>,
    sink: F,
}

impl<F: FnMut(&str, usize, usize)> Run<F> {
    fn push(&mut self, c: char, at: usize, end: usize) {
        if !c.is_alphanumeric() {
            self.close();
            return;
        }
        let unspaced = is_unspaced(c);
        if self.unspaced.is_some_and(|u| u != unspaced) {
            self.close();
        }
        if self.unspaced.is_none() {
            self.unspaced = Some(unspaced);
            self.start = at;
        }
        self.end = end;
        if unspaced {
            self.chars.push((c, at, end));
        } else {
            self.word.push(c);
        }
    }

    fn close(&mut self) {
        match self.unspaced.take() {
            None => {}
            Some(false) => {
                (self.sink)(&self.word, self.start, self.end);
                self.word.clear();
            }
            Some(true) => {
                self.close_unspaced();
                self.chars.clear();
            }
        }
    }

    fn close_unspaced(&mut self) {
        let chars = &self.chars;
        let mut buf = String::new();
        let mut emit = |from: usize, to: usize| {
            buf.clear();
            buf.extend(chars[from..=to].iter().map(|(c, _, _)| *c));
            (self.sink)(&buf, chars[from].1, chars[to].2);
        };
        let pairs = chars.len() > 1;
        for i in 0..chars.len() {
            let single = match self.mode {
                Mode::Document | Mode::Units => true,
                Mode::Query => !pairs,
            };
            if single {
                emit(i, i);
            }
            if self.mode != Mode::Units && i + 1 < chars.len() {
                emit(i, i + 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str, mode: Mode) -> Vec<String> {
        let mut out = Vec::new();
        each_token(text, mode, |t, _, _| out.push(t.to_owned()));
        out
    }

    #[test]
    fn spaced_words_are_tokens_and_separators_break() {
        assert_eq!(
            tokens("Relatório-FINAL, nº 42! a<b>c", Mode::Document),
            ["relatorio", "final", "no", "42", "a", "b", "c"]
        );
        assert!(tokens("____ --- !!", Mode::Query).is_empty());
    }

    #[test]
    fn unspaced_runs_are_cut_into_pairs() {
        assert_eq!(
            tokens("東京都に住む", Mode::Document),
            [
                "東", "東京", "京", "京都", "都", "都に", "に", "に住", "住", "住む", "む"
            ]
        );
        assert_eq!(tokens("京都", Mode::Query), ["京都"]);
        assert_eq!(tokens("東京都", Mode::Query), ["東京", "京都"]);
        assert_eq!(tokens("都", Mode::Query), ["都"]);
        assert_eq!(tokens("東京都", Mode::Units), ["東", "京", "都"]);
        // A switch of kind ends a token.
        assert_eq!(
            tokens("ACME東京2024年", Mode::Query),
            ["acme", "東京", "2024", "年"]
        );
        assert_eq!(tokens("ภาษาไทย", Mode::Query).len(), 6);
    }

    #[test]
    fn long_tokens_are_kept_whole() {
        let digest = "ab".repeat(64);
        assert_eq!(
            tokens(&format!("sha {digest}."), Mode::Document),
            ["sha", &digest]
        );
    }

    #[test]
    fn ranges_cover_the_source_of_each_token() {
        let text = "Kick\u{200b}off, 東京";
        let mut seen = Vec::new();
        each_token(text, Mode::Document, |t, at, end| {
            seen.push((t.to_owned(), text[at..end].to_owned()))
        });
        assert_eq!(
            seen[0],
            ("kickoff".to_owned(), "Kick\u{200b}off".to_owned())
        );
        assert_eq!(seen[2], ("東京".to_owned(), "東京".to_owned()));
    }
}
