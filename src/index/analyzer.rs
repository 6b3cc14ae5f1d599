//! The index's analyzer: [`crate::text`]'s tokens as a tantivy tokenizer, so that the index
//! splits, folds and pairs text exactly as the live scan does and a query word reaches the
//! index as the same tokens it is matched by live. The one thing the index adds is a token
//! size: a token longer than [`MAX_TOKEN_BYTES`] is not indexed (a base64 run, an embedded
//! blob), and a query token that long cannot be answered from the index — the search says so
//! ([`unrepresentable`]) instead of dropping the token and matching wider.
//!
//! The analyzer's name carries [`crate::text::ANALYZER_VERSION`] and is recorded in the index's
//! schema: an index built by another version fails to open as
//! [`IndexError::Outdated`](super::IndexError::Outdated), never serving tokens of another
//! analysis as proof.

use tantivy::tokenizer::{Token, TokenStream, Tokenizer};

use crate::text::{Mode, each_token};

/// The analyzer's registered name, with the text analysis version it carries.
pub(crate) const NAME: &str = "mail-v2";

/// Longest token indexed, in bytes of its normalized form. Far above any word, id, digest
/// (SHA-512 in hex is 128) or URL part; far below tantivy's term limit (65,530 bytes).
pub(crate) const MAX_TOKEN_BYTES: usize = 1_024;

/// The warning of a search whose query holds a token the index cannot represent.
pub(crate) const QUERY_TOKEN_TOO_LONG: &str = "query_token_too_long";

/// Why a query cannot be answered from the index, `None` when it can: a token longer than the
/// index keeps.
pub(crate) fn unrepresentable(query: &str) -> Option<&'static str> {
    let mut too_long = false;
    each_token(query, Mode::Query, |t, _, _| {
        too_long |= t.len() > MAX_TOKEN_BYTES;
    });
    too_long.then_some(QUERY_TOKEN_TOO_LONG)
}

/// Terms one spelling of a candidate search may ask for (a 200-character signal of one-letter
/// atoms would otherwise ask for thousands).
const MAX_SPELLING_TERMS: usize = 512;

/// The atoms of a text for a candidate search: its tokens (unspaced characters one by one, as
/// the index holds each of them), cut where they switch between letters and digits (`2024q1` →
/// `2024`, `q`, `1`).
fn atoms(text: &str) -> Vec<String> {
    let mut runs: Vec<String> = Vec::new();
    each_token(text, Mode::Units, |token, _, _| {
        let mut last: Option<bool> = None;
        for ch in token.chars() {
            let digit = ch.is_numeric();
            match runs.last_mut() {
                Some(run) if last == Some(digit) => run.push(ch),
                _ => runs.push(ch.to_string()),
            }
            last = Some(digit);
        }
    });
    runs
}

/// The indexed tokens that may spell `text` ([`Clue::Text`](super::Clue::Text)), as every
/// store asks for them: one list per atom, each atom's list any of which must occur in a field,
/// every atom's list in one field. The text's tokens split between letters and digits are its
/// atoms; a message's tokens that spell it are runs of consecutive atoms, so each atom must
/// occur inside one indexed token that is such a run. An atom inside a run too long to be
/// indexed constrains nothing (the token holding it may be one the analyzer dropped). `None`:
/// nothing narrows (every message may spell it).
pub(crate) fn spelling(text: &str) -> Option<Vec<Vec<String>>> {
    let atoms = atoms(text);
    let mut per_atom: Vec<Vec<String>> = Vec::new();
    for i in 0..atoms.len() {
        let mut runs = Vec::new();
        let mut open = true;
        'starts: for j in (0..=i).rev() {
            for k in i..atoms.len() {
                let len: usize = atoms[j..=k].iter().map(String::len).sum();
                if len > MAX_TOKEN_BYTES {
                    open = false;
                    break 'starts;
                }
                runs.push(atoms[j..=k].concat());
            }
        }
        if open {
            per_atom.push(runs);
        }
    }
    // Every atom's runs, unless there are so many that the query would be slow: then the
    // first and last atom's (the runs a spelling starts and ends with).
    let terms: usize = per_atom.iter().map(Vec::len).sum();
    if terms > MAX_SPELLING_TERMS && per_atom.len() > 2 {
        let last = per_atom.pop();
        per_atom.truncate(1);
        per_atom.extend(last);
    }
    (!per_atom.is_empty()).then_some(per_atom)
}

/// The tokenizer registered under [`NAME`].
#[derive(Clone, Default)]
pub(crate) struct MailTokenizer;

/// The tokens of one text, computed at once (tantivy reads them all anyway) into one buffer:
/// no allocation per token.
pub(crate) struct MailTokens {
    /// Every kept token's text, end to end.
    texts: String,
    /// Per token: its end in `texts`, source offsets and position.
    spans: Vec<(usize, usize, usize, usize)>,
    next: usize,
    current: Token,
}

impl Tokenizer for MailTokenizer {
    type TokenStream<'a> = MailTokens;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> MailTokens {
        let mut texts = String::with_capacity(text.len());
        let mut spans = Vec::new();
        let mut position = 0;
        each_token(text, Mode::Document, |t, from, to| {
            if t.len() <= MAX_TOKEN_BYTES {
                texts.push_str(t);
                spans.push((texts.len(), from, to, position));
            }
            position += 1;
        });
        MailTokens {
            texts,
            spans,
            next: 0,
            current: Token::default(),
        }
    }
}

impl TokenStream for MailTokens {
    fn advance(&mut self) -> bool {
        let Some(&(end, from, to, position)) = self.spans.get(self.next) else {
            return false;
        };
        let start = match self.next {
            0 => 0,
            i => self.spans[i - 1].0,
        };
        self.next += 1;
        let token = &mut self.current;
        token.text.clear();
        token.text.push_str(&self.texts[start..end]);
        token.offset_from = from;
        token.offset_to = to;
        token.position = position;
        token.position_length = 1;
        true
    }

    fn token(&self) -> &Token {
        &self.current
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_carries_the_analysis_version() {
        assert_eq!(
            NAME,
            format!("mail-v{}", crate::text::ANALYZER_VERSION),
            "bump NAME with ANALYZER_VERSION"
        );
    }

    #[test]
    fn the_index_keeps_the_tokens_the_text_module_gives() {
        let text = "Kick\u{200b}off: 東京都, İstanbul ".to_owned() + &"f".repeat(2_000);
        let mut stream = MailTokenizer.token_stream(&text);
        let mut seen = Vec::new();
        while stream.advance() {
            seen.push(stream.token().text.clone());
        }
        let mut expected = crate::text::tokens(&text);
        expected.retain(|t| t.len() <= MAX_TOKEN_BYTES);
        assert_eq!(seen, expected);
        assert!(seen.contains(&"istanbul".to_owned()));
    }

    #[test]
    fn an_over_long_query_token_is_named_never_dropped() {
        assert_eq!(unrepresentable("invoice e3b0c442"), None);
        let long = "x".repeat(MAX_TOKEN_BYTES + 1);
        assert_eq!(
            unrepresentable(&format!("invoice {long}")),
            Some(QUERY_TOKEN_TOO_LONG)
        );
    }
}
