//! Text folding for matching: the one normalisation every matcher uses (reference §6.3). NFKD,
//! combining marks removed, HTML tags stripped, every non-alphanumeric character a separator,
//! lower-cased. The search engine's exact-token matcher and the Maildir scan's substring
//! matcher both build on it, so a query folds the same way wherever it is matched.

use unicode_normalization::char::{decompose_compatible, is_combining_mark};

/// Normalised tokens of `text`, in order.
pub(crate) fn tokens(text: &str) -> Vec<String> {
    let mut folded = String::new();
    fold_into(text, &mut folded);
    folded
        .split(' ')
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Appends the folded tokens of `text` to `out`, each followed by one space, so that a folded
/// word occurs in `out` exactly when it occurs inside one token of `text`. One allocation for
/// the whole text instead of one per token: the scan folds every message it reads.
pub(crate) fn fold_into(text: &str, out: &mut String) {
    let mut state = Fold {
        out,
        in_tag: false,
        in_word: false,
    };
    for ch in text.chars() {
        if ch.is_ascii() {
            // ASCII is its own NFKD and has no combining marks: the common case, kept cheap.
            state.push(ch);
        } else {
            // Decomposing one character at a time gives what decomposing the text gives once
            // the combining marks are dropped: canonical reordering moves only marks.
            decompose_compatible(ch, |part| {
                if !is_combining_mark(part) {
                    state.push(part);
                }
            });
        }
    }
    if state.in_word {
        state.out.push(' ');
    }
}

/// The folding state machine over decomposed characters.
struct Fold<'a> {
    out: &'a mut String,
    in_tag: bool,
    in_word: bool,
}

impl Fold<'_> {
    fn push(&mut self, ch: char) {
        if ch == '<' {
            self.in_tag = true;
        }
        let is_word = !self.in_tag && ch.is_alphanumeric();
        if ch == '>' {
            self.in_tag = false;
        }
        if is_word {
            if ch.is_ascii() {
                self.out.push(ch.to_ascii_lowercase());
            } else {
                self.out.extend(ch.to_lowercase());
            }
            self.in_word = true;
        } else if self.in_word {
            self.out.push(' ');
            self.in_word = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_diacritics_case_and_punctuation() {
        assert_eq!(
            tokens("Relatório-FINAL, nº 42!"),
            vec!["relatorio", "final", "no", "42"]
        );
        assert_eq!(tokens("<p>Olá <b>mundo</b></p>"), vec!["ola", "mundo"]);
    }

    /// Folding by the definition: the NFKD of the whole text, marks dropped.
    fn reference(text: &str) -> String {
        use unicode_normalization::UnicodeNormalization;
        let mut out = String::new();
        let mut state = Fold {
            out: &mut out,
            in_tag: false,
            in_word: false,
        };
        for ch in text.nfkd().filter(|c| !is_combining_mark(*c)) {
            state.push(ch);
        }
        if state.in_word {
            state.out.push(' ');
        }
        out
    }

    proptest::proptest! {
        /// The per-character fast path equals the definition on any text.
        #[test]
        fn folding_per_character_equals_folding_the_whole_nfkd(text in "\\PC{0,40}") {
            let mut fast = String::new();
            fold_into(&text, &mut fast);
            proptest::prop_assert_eq!(fast, reference(&text));
        }
    }

    #[test]
    fn folding_known_hard_cases() {
        for text in [
            "Relatório-FINAL, nº 42!",
            "e\u{301}\u{327}x ﬁnal ＩＮＶＯＩＣＥ 한국어 Straße İstanbul ǅ",
            "<p>Olá <b>mundo</b></p> a\u{308}\u{301}",
            "Ω ℌ ① ⅻ ﬀ",
        ] {
            let mut fast = String::new();
            fold_into(text, &mut fast);
            assert_eq!(fast, reference(text), "{text}");
        }
    }

    #[test]
    fn fold_into_separates_every_token_by_one_space() {
        let mut out = String::new();
        fold_into("  Fatura:12 -- Março ", &mut out);
        fold_into("x", &mut out);
        assert_eq!(out, "fatura 12 marco x ");
    }
}
