//! A message as the PostgreSQL store writes it, and mailgate's tokens as the database's text
//! types: each field's tokens (the shared analyzer's, [`crate::index::analyzer`]) become the
//! lexemes of a `tsvector` literal and a query's tokens the lexemes of a `tsquery`, quoted here,
//! so the database never tokenizes, folds or stems anything. Beside the lexemes a row keeps what
//! BM25 needs and a `tsvector` without positions cannot give: each field's length and how often
//! a token occurs when more than once.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::backends::model::ContentGap;
use crate::index::analyzer::MAX_TOKEN_BYTES;
use crate::index::stored::{self, raw};
use crate::index::{IndexError, IndexedMessage};
use crate::text::{Mode, each_token};

/// The text fields, in the order of `field_lengths` and of the ranking boosts (as tantivy's):
/// subject, from, recipients, body, attachment names, attachment text.
pub(crate) const FIELDS: [(&str, f64); 6] = [
    ("subject_tokens", 3.0),
    ("from_tokens", 2.0),
    ("recipient_tokens", 1.2),
    ("body_tokens", 1.0),
    ("attachment_name_tokens", 0.8),
    ("attachment_text_tokens", 0.5),
];
pub(crate) const BODY: usize = 3;
pub(crate) const ATTACHMENT_NAMES: usize = 4;
pub(crate) const ATTACHMENT_TEXT: usize = 5;

/// What one field's lexemes may take in a `tsvector` (PostgreSQL refuses one over 1 MiB): a
/// field with more distinct tokens keeps the first ones and marks the message incomplete.
const MAX_LEXEME_BYTES: usize = 900_000;
/// What a lexeme costs in a `tsvector` beside its text (its entry, alignment).
const LEXEME_OVERHEAD: usize = 6;

/// One message's row.
pub(crate) struct MessageRow {
    pub(crate) folder_id: String,
    pub(crate) id: String,
    pub(crate) received: i64,
    pub(crate) is_read: bool,
    pub(crate) has_attachments: bool,
    pub(crate) gap: i16,
    pub(crate) attachments_unread: bool,
    pub(crate) internet_message_id: Option<String>,
    pub(crate) from_raw: Vec<String>,
    pub(crate) subject_raw: String,
    /// Per field, the `tsvector` literal of its distinct tokens.
    pub(crate) lexemes: [String; 6],
    pub(crate) field_lengths: Vec<i32>,
    /// The `repeats` object, as JSON text.
    pub(crate) repeats: String,
    pub(crate) summary: Vec<u8>,
}

/// `token` as a quoted lexeme of a `tsvector` or `tsquery` literal: inside quotes a quote and a
/// backslash are doubled, and nothing else is interpreted.
pub(crate) fn quoted(token: &str, out: &mut String) {
    out.push('\'');
    for c in token.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
}

/// A `tsquery` literal: every token in `all`, each as any of its spellings.
pub(crate) fn all_of_any(all: &[Vec<String>]) -> String {
    let mut out = String::new();
    for (i, any) in all.iter().enumerate() {
        if i > 0 {
            out.push_str(" & ");
        }
        out.push('(');
        for (j, token) in any.iter().enumerate() {
            if j > 0 {
                out.push_str(" | ");
            }
            quoted(token, &mut out);
        }
        out.push(')');
    }
    out
}

/// One field's tokens: how often each occurs, and how many there are.
#[derive(Default)]
struct FieldTokens {
    counts: BTreeMap<String, u32>,
    length: i32,
}

impl FieldTokens {
    fn add(&mut self, text: &str) {
        each_token(text, Mode::Document, |t, _, _| {
            // As the local store's analyzer: a token too long to index is not counted.
            if t.len() <= MAX_TOKEN_BYTES {
                *self.counts.entry(t.to_owned()).or_default() += 1;
                self.length = self.length.saturating_add(1);
            }
        });
    }

    /// The `tsvector` literal, and whether every token fit.
    fn lexemes(&self) -> (String, bool) {
        let mut out = String::new();
        let mut bytes = 0;
        for token in self.counts.keys() {
            bytes += token.len() + LEXEME_OVERHEAD;
            if bytes > MAX_LEXEME_BYTES {
                return (out, false);
            }
            if !out.is_empty() {
                out.push(' ');
            }
            quoted(token, &mut out);
        }
        (out, true)
    }
}

impl MessageRow {
    pub(crate) fn of(m: &IndexedMessage) -> Result<Self, IndexError> {
        let s = &m.summary;
        let mut fields: [FieldTokens; 6] = Default::default();
        let mut from_raw = Vec::new();
        if let Some(subject) = &s.subject {
            fields[0].add(subject);
        }
        if let Some(from) = &s.from {
            for part in [&from.name, &from.address].into_iter().flatten() {
                fields[1].add(part);
                from_raw.push(raw(part));
            }
        }
        for r in &m.recipients {
            fields[2].add(r);
        }
        fields[BODY].add(&m.body);
        for name in s.attachments.iter().filter_map(|a| a.name.as_deref()) {
            fields[ATTACHMENT_NAMES].add(name);
        }
        fields[ATTACHMENT_TEXT].add(&m.attachment_text);

        let mut summary = s.clone();
        let mut attachments_unread = !m.attachments_whole;
        let mut lexemes: [String; 6] = Default::default();
        let mut repeats = serde_json::Map::new();
        for (i, field) in fields.iter().enumerate() {
            let (literal, whole) = field.lexemes();
            lexemes[i] = literal;
            if !whole {
                // What was left out cannot be proved absent: the message says so.
                match i {
                    ATTACHMENT_TEXT => attachments_unread = true,
                    _ => {
                        summary.gap.get_or_insert(ContentGap::TooLarge);
                    }
                }
            }
            for (token, &n) in &field.counts {
                if n > 1 {
                    repeats.insert(repeat_key(i, token), n.into());
                }
            }
        }
        let repeats = serde_json::Value::Object(repeats).to_string();
        let gap = i16::try_from(stored::gap_code(summary.gap))
            .map_err(|_| IndexError::Store("a gap code out of range".to_owned()))?;
        Ok(Self {
            folder_id: s.folder_id.clone(),
            id: s.id.clone(),
            received: s.received.map_or(0, |d| d.timestamp()),
            is_read: s.is_read,
            has_attachments: s.has_attachments,
            gap,
            attachments_unread,
            internet_message_id: m.internet_message_id.as_deref().map(without_nul),
            from_raw: from_raw.iter().map(|v| without_nul(v)).collect(),
            subject_raw: without_nul(&s.subject.as_deref().map(raw).unwrap_or_default()),
            lexemes,
            field_lengths: fields.iter().map(|f| f.length).collect(),
            repeats,
            summary: stored::encode(&summary)?,
        })
    }
}

/// PostgreSQL's text holds no NUL character: one in a header value reads as U+FFFD in the
/// substring filters (the summary is stored as bytes, unchanged).
fn without_nul(s: &str) -> String {
    if s.contains('\0') {
        s.replace('\0', "\u{fffd}")
    } else {
        s.to_owned()
    }
}

/// The `repeats` key of a token in field `i`.
pub(crate) fn repeat_key(i: usize, token: &str) -> String {
    let mut key = String::with_capacity(token.len() + 2);
    let _ = write!(key, "{i}:{token}");
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_doubles_quotes_and_backslashes_only() {
        let mut out = String::new();
        quoted("it's\\x", &mut out);
        assert_eq!(out, "'it''s\\\\x'");
        assert_eq!(
            all_of_any(&[vec!["a".into(), "b".into()], vec!["c".into()]]),
            "('a' | 'b') & ('c')"
        );
    }

    #[test]
    fn a_field_too_large_for_a_tsvector_keeps_what_fits_and_says_so() {
        let mut field = FieldTokens::default();
        for i in 0..200_000 {
            field.add(&format!("t{i}x"));
        }
        let (literal, whole) = field.lexemes();
        assert!(!whole);
        assert!(literal.len() <= MAX_LEXEME_BYTES);
        let mut small = FieldTokens::default();
        small.add("one two two");
        assert_eq!(small.lexemes(), ("'one' 'two'".to_owned(), true));
        assert_eq!(small.length, 3);
    }
}
