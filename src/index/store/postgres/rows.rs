//! A message as the PostgreSQL store writes it, and mailgate's tokens as the database's text
//! types: each field's tokens (the shared analyzer's, [`crate::index::analyzer`]) become the
//! lexemes of a `tsvector` literal and a query's tokens the lexemes of a `tsquery`, quoted here,
//! so the database never tokenizes, folds or stems anything. Beside the lexemes a row keeps what
//! BM25 needs and a `tsvector` without positions cannot give: each field's length and how often
//! a token occurs when more than once.
//!
//! A `tsvector` holds at most 1 MiB. The body's lexemes that do not fit its row's literal go to
//! chunk literals of their own (`mailgate_body_lexemes`), each token in exactly one literal, so
//! the store holds a long body whole ([`MAX_BODY_CHUNKS`] is the one bound left). The other
//! fields are bounded far below (headers, attachment names, the extracted text's budget) and
//! keep one literal.

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

/// What one `tsvector` literal's lexemes may take (PostgreSQL refuses a `tsvector` over 1 MiB):
/// a field's lexemes are cut into literals of at most this much.
const MAX_LEXEME_BYTES: usize = 900_000;
/// What a lexeme costs in a `tsvector` beside its text (its entry, alignment).
const LEXEME_OVERHEAD: usize = 6;

/// The body's chunk literals beyond its row's, at most: with the row's, 49 literals, 44.1 MB of
/// lexemes. A body of spaced words cannot need more within `mime::MAX_BODY_CHARS` (8 Mi
/// characters): a distinct token of `c` characters costs at most `4c + 6` bytes and takes
/// `c + 1` characters of text with its separator, at most 5 bytes a character, 42 MB in all.
/// Only a body of an unspaced script's distinct character pairs (each character gives itself and
/// a pair) or of characters that normalize to several can pass it: it keeps the first lexemes
/// and is marked [`ContentGap::Body`] (its tail's tokens are not all here).
pub(crate) const MAX_BODY_CHUNKS: usize = 48;

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
    /// Per field, the `tsvector` literal of its distinct tokens (the body's first ones only).
    pub(crate) lexemes: [String; 6],
    /// The body's further lexemes, as `tsvector` literals of `mailgate_body_lexemes` (chunk 1,
    /// 2, …): none unless the body's pass one literal.
    pub(crate) body_chunks: Vec<String>,
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

    /// The `tsvector` literals of the distinct tokens, in order, each under the limit (at least
    /// one, at most `max`), and whether every token fit. A token is in exactly one literal.
    fn literals(&self, max: usize) -> (Vec<String>, bool) {
        let mut out = vec![String::new()];
        let mut bytes = 0;
        for token in self.counts.keys() {
            let cost = token.len() + LEXEME_OVERHEAD;
            if bytes + cost > MAX_LEXEME_BYTES {
                if out.len() >= max {
                    return (out, false);
                }
                out.push(String::new());
                bytes = 0;
            }
            bytes += cost;
            if let Some(literal) = out.last_mut() {
                if !literal.is_empty() {
                    literal.push(' ');
                }
                quoted(token, literal);
            }
        }
        (out, true)
    }
}

impl MessageRow {
    pub(crate) fn of(m: &IndexedMessage) -> Result<Self, IndexError> {
        Self::with_chunks(m, MAX_BODY_CHUNKS)
    }

    /// [`Self::of`], the body cut into at most `max_chunks` chunk literals.
    fn with_chunks(m: &IndexedMessage, max_chunks: usize) -> Result<Self, IndexError> {
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
        let mut body_chunks = Vec::new();
        let mut repeats = serde_json::Map::new();
        for (i, field) in fields.iter().enumerate() {
            let max = if i == BODY { 1 + max_chunks } else { 1 };
            let (mut literals, whole) = field.literals(max);
            if i == BODY {
                body_chunks = literals.split_off(literals.len().min(1));
            }
            lexemes[i] = literals.into_iter().next().unwrap_or_default();
            if !whole {
                // What was left out cannot be proved absent: the message says so.
                match i {
                    ATTACHMENT_TEXT => attachments_unread = true,
                    // Past the chunks' bound: the body's tail is not all here.
                    BODY => {
                        summary.gap.get_or_insert(ContentGap::Body);
                    }
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
            body_chunks,
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

    /// The lexemes of `literal`, as PostgreSQL reads it (the tokens here need no unquoting).
    fn lexemes_of(literal: &str) -> Vec<&str> {
        literal
            .split(' ')
            .filter(|l| !l.is_empty())
            .map(|l| l.trim_matches('\''))
            .collect()
    }

    /// `n` distinct tokens of about eight bytes, as a log's ids are.
    fn many(n: usize) -> String {
        (0..n).map(|i| format!("t{i:06}x ")).collect()
    }

    #[test]
    fn a_field_too_large_for_one_tsvector_is_cut_into_literals_holding_each_token_once() {
        let mut field = FieldTokens::default();
        field.add(&many(200_000));
        let (literals, whole) = field.literals(10);
        assert!(whole);
        assert_eq!(literals.len(), 4, "200,000 tokens of 14 bytes: 2.8 MB");
        let mut all = Vec::new();
        for (i, literal) in literals.iter().enumerate() {
            let lexemes = lexemes_of(literal);
            let bytes: usize = lexemes.iter().map(|l| l.len() + LEXEME_OVERHEAD).sum();
            assert!(bytes <= MAX_LEXEME_BYTES);
            // Each literal but the last is full: a next token would not have fit.
            assert!(
                i + 1 == literals.len() || bytes + 14 > MAX_LEXEME_BYTES,
                "{i}: {bytes}"
            );
            all.extend(lexemes);
        }
        let expected: Vec<&String> = field.counts.keys().collect();
        assert_eq!(all.len(), expected.len());
        assert!(
            all.iter().zip(&expected).all(|(a, b)| a == b),
            "in order, once each"
        );
        // A bound on the literals keeps the first ones and says so.
        let (first, whole) = field.literals(1);
        assert!(!whole);
        assert_eq!(first, literals[..1]);
        let mut small = FieldTokens::default();
        small.add("one two two");
        assert_eq!(small.literals(1), (vec!["'one' 'two'".to_owned()], true));
        assert_eq!(small.length, 3);
        assert_eq!(
            FieldTokens::default().literals(5),
            (vec![String::new()], true)
        );
    }

    fn message(body: String, subject: &str) -> IndexedMessage {
        let mut summary = crate::backends::model::MessageSummary::blank("m1", "inbox");
        summary.subject = Some(subject.to_owned());
        IndexedMessage {
            internet_message_id: None,
            thread_ids: Vec::new(),
            recipients: Vec::new(),
            body,
            attachment_text: String::new(),
            attachments_whole: true,
            summary,
        }
    }

    #[test]
    fn a_long_body_goes_to_chunks_whole_and_only_past_their_bound_is_marked_cut() {
        let m = message(format!("{} zulu", many(150_000)), "status");
        let row = MessageRow::of(&m).expect("a row");
        assert_eq!(row.gap, 0, "a long body is no gap: it is held whole");
        assert_eq!(row.body_chunks.len(), 2);
        assert_eq!(
            row.body_chunks
                .last()
                .map(|c| lexemes_of(c).last().copied()),
            Some(Some("zulu")),
            "the last token, in byte order, in the last chunk"
        );
        assert!(!lexemes_of(&row.lexemes[BODY]).contains(&"zulu"));
        assert_eq!(row.field_lengths[BODY], 150_001);
        // Past the chunks' bound: the body's gap, never TooLarge (the message was read whole).
        let cut = MessageRow::with_chunks(&m, 1).expect("a row");
        assert_eq!(cut.body_chunks.len(), 1);
        assert_eq!(
            cut.gap,
            i16::try_from(stored::gap_code(Some(ContentGap::Body))).expect("a code")
        );
        assert_eq!(cut.lexemes[BODY], row.lexemes[BODY]);
        // A short body has no chunk; another field too large for its literal is TooLarge.
        let short = MessageRow::of(&message("a short body".to_owned(), "status")).expect("a row");
        assert!(short.body_chunks.is_empty() && short.gap == 0);
        let subject = MessageRow::of(&message(String::new(), &many(100_000))).expect("a row");
        assert!(subject.body_chunks.is_empty());
        assert_eq!(
            subject.gap,
            i16::try_from(stored::gap_code(Some(ContentGap::TooLarge))).expect("a code")
        );
    }

    #[test]
    fn the_chunks_bound_holds_any_spaced_body_within_the_body_limit() {
        // The bound's arithmetic: at most 5 bytes of lexemes a character of spaced text, and a
        // literal wastes at most one longest token's cost at its end.
        let literals = 1 + MAX_BODY_CHUNKS;
        let usable = literals * (MAX_LEXEME_BYTES - (MAX_TOKEN_BYTES + LEXEME_OVERHEAD));
        assert!(usable >= 5 * crate::mime::MAX_BODY_CHARS, "{usable}");
    }
}
