//! Exact-token matching for the local scan: the fallback whose recall is lower than a backend's
//! relevance search but whose answer is verifiable.
//!
//! Normalisation (reference §6.3): NFKD, combining marks removed, HTML tags stripped, every
//! non-alphanumeric character becomes a separator, lower-cased. A query matches a message when
//! every query token appears as a whole token somewhere in its subject, preview, body, sender or
//! attachment names.

use std::collections::HashSet;

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use super::Candidate;

/// Normalised tokens of `text`, in order.
pub(crate) fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_tag = false;
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
            current.extend(ch.to_lowercase());
        } else if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// A compiled query: the set of tokens that must all be present.
#[derive(Clone, Debug)]
pub(crate) struct TokenQuery {
    required: Vec<String>,
}

impl TokenQuery {
    pub(crate) fn new(query: &str) -> Self {
        let mut required = tokens(query);
        required.sort();
        required.dedup();
        Self { required }
    }

    /// A query with no alphanumeric token cannot prove anything, so it matches nothing.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.required.is_empty()
    }

    pub(crate) fn matches(&self, c: &Candidate) -> bool {
        if self.required.is_empty() {
            return false;
        }
        let mut seen: HashSet<String> = HashSet::new();
        let mut feed = |text: &str| {
            for t in tokens(text) {
                seen.insert(t);
            }
        };
        if let Some(s) = &c.subject {
            feed(s);
        }
        feed(&c.preview);
        feed(&c.body);
        if let Some(from) = &c.from {
            if let Some(a) = &from.address {
                feed(a);
            }
            if let Some(n) = &from.name {
                feed(n);
            }
        }
        for a in &c.attachments {
            if let Some(n) = &a.name {
                feed(n);
            }
        }
        self.required.iter().all(|t| seen.contains(t))
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
    fn whole_tokens_only() {
        let q = TokenQuery::new("fatura");
        let mut c = crate::search::engine::tests::candidate("1", "faturas de março");
        assert!(!q.matches(&c));
        c.subject = Some("Fatura 12".into());
        assert!(q.matches(&c));
    }

    #[test]
    fn punctuation_only_query_matches_nothing() {
        let q = TokenQuery::new("?!");
        assert!(q.is_empty());
        let c = crate::search::engine::tests::candidate("1", "anything");
        assert!(!q.matches(&c));
    }
}
