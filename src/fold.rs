//! Text folding for matching: the one normalisation every matcher uses (reference §6.3). NFKD,
//! combining marks removed, HTML tags stripped, every non-alphanumeric character a separator,
//! lower-cased. The search engine's exact-token matcher and the Maildir scan's substring
//! matcher both build on it, so a query folds the same way wherever it is matched.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

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
    let mut in_tag = false;
    let mut in_word = false;
    for ch in text.nfkd() {
        if is_combining_mark(ch) {
            continue;
        }
        if ch == '<' {
            in_tag = true;
        }
        let is_word = !in_tag && ch.is_alphanumeric();
        if ch == '>' {
            in_tag = false;
        }
        if is_word {
            out.extend(ch.to_lowercase());
            in_word = true;
        } else if in_word {
            out.push(' ');
            in_word = false;
        }
    }
    if in_word {
        out.push(' ');
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

    #[test]
    fn fold_into_separates_every_token_by_one_space() {
        let mut out = String::new();
        fold_into("  Fatura:12 -- Março ", &mut out);
        fold_into("x", &mut out);
        assert_eq!(out, "fatura 12 marco x ");
    }
}
