//! Exact-token matching for the local scan: the fallback whose recall is lower than a backend's
//! relevance search but whose answer is verifiable.
//!
//! Normalisation and tokens are [`crate::text`]'s, the index's too (reference §6.3, widened by
//! issue 27: full case folding, invisible characters dropped inside words, unspaced scripts
//! matched by character pairs). A query matches a message when
//! every query token appears as a whole token somewhere in its subject, preview, body, sender or
//! attachment names. Summaries carry no body: the engine matches the rest first and fetches a
//! body only for a message the rest does not match.

use std::collections::HashSet;

use crate::backends::model::MessageSummary;
use crate::text::{query_tokens, tokens};

/// A compiled query: the set of tokens that must all be present.
#[derive(Clone, Debug)]
pub(crate) struct TokenQuery {
    required: Vec<String>,
}

impl TokenQuery {
    pub(crate) fn new(query: &str) -> Self {
        let mut required = query_tokens(query);
        required.sort();
        required.dedup();
        Self { required }
    }

    /// A query with no alphanumeric token cannot prove anything, so it matches nothing.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.required.is_empty()
    }

    /// Whether every token occurs in `c` (subject, preview, sender, attachment names) or in
    /// `body` when given.
    pub(crate) fn matches(&self, c: &MessageSummary, body: Option<&str>) -> bool {
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
        if let Some(body) = body {
            feed(body);
        }
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
    fn whole_tokens_only() {
        let q = TokenQuery::new("fatura");
        let mut c = crate::search::engine::tests::candidate("1", "faturas de março");
        assert!(!q.matches(&c, None));
        assert!(q.matches(&c, Some("a fatura, anexa")));
        c.subject = Some("Fatura 12".into());
        assert!(q.matches(&c, None));
    }

    #[test]
    fn punctuation_only_query_matches_nothing() {
        let q = TokenQuery::new("?!");
        assert!(q.is_empty());
        let c = crate::search::engine::tests::candidate("1", "anything");
        assert!(!q.matches(&c, Some("anything")));
    }
}
