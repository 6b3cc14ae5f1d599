//! Maildir's listing and search: an exhaustive scan of one folder, so that its answer can prove
//! absence at the sizes real Maildirs have (issue 10: a needle 10,000 deep in a 20,000-message
//! folder is found; a nonsense query is `NOT_FOUND` with the whole folder read).
//!
//! Cost model: the folder listing (file names) gives every message's delivery time and flags,
//! so the filters that need no content (read state, dates) are decided without opening a file.
//! A file is read and parsed only when the query or a content filter needs it — once per call —
//! and matched header-first: subject, sender and attachment names, then the body only for the
//! words those did not contain. A pure listing reads only the messages it returns. The files
//! are split across the Maildir worker pool (rayon, one thread per core, shared by every call);
//! each split keeps only its best `keep` matches by the request's order, so memory does not grow
//! with the number of hits. The deadline is checked before every message: a scan it stops is
//! `timed_out`, never complete.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder};
use cap_std::fs::Dir;
use rayon::prelude::*;

use super::prefilter::{Prefilter, html_may_hold};
use super::{
    MaildirStore, MessageFile, PAGE_SIZE, content_gap, encode_id, folder_dir, list_files,
    read_file, resolve_folder, secs_to_utc, to_summary, unread_gap, unread_summary,
};
use crate::backends::BackendError;
use crate::backends::model::{
    Gaps, MessageSummary, Order, Page, ScanRequest, ScanStop, SortBy, SortOrder,
};
use crate::mime::{self, ParsedMessage};
use crate::text::{Mode, each_token, fold_into, query_tokens};

/// Most threads of the Maildir worker pool.
pub(super) const MAX_WORKERS: usize = 8;
/// Files a split holds at least (rayon's `with_min_len`), so splitting costs little.
const CLAIM: usize = 32;

pub(super) async fn run(
    store: &MaildirStore,
    req: &ScanRequest,
    query: Option<&str>,
) -> Result<Page, BackendError> {
    let req = req.clone();
    let words = query.map(Words::new);
    store
        .blocking(move |root| scan_folder(root, &req, words.as_ref()))
        .await
}

/// The query's folded words; a message matches when every word occurs inside one of its folded
/// tokens (the backend's own substring search, wider than the engine's whole-token fallback).
pub(super) struct Words(pub(super) Vec<String>, Option<AhoCorasick>);

impl Words {
    pub(super) fn new(query: &str) -> Self {
        let mut words = query_tokens(query);
        words.sort();
        words.dedup();
        // For ASCII words, an ASCII-case-insensitive automaton: ASCII text folds to its own
        // lower-cased alphanumeric runs, so a word absent from it case-insensitively is absent
        // from its folding (the folding of non-ASCII text is computed, never guessed).
        let any_case = if words.iter().all(|w| w.is_ascii()) {
            AhoCorasickBuilder::new()
                .ascii_case_insensitive(true)
                .build(&words)
                .ok()
        } else {
            None
        };
        Words(words, any_case)
    }

    /// Indexes of the words the headers (subject, sender, attachment names) do not hold.
    fn missing_indexes(&self, parsed: &ParsedMessage) -> Vec<usize> {
        let mut hay = String::new();
        if let Some(subject) = &parsed.subject {
            fold_into(subject, &mut hay);
        }
        if let Some(from) = parsed.from.first() {
            for part in [from.address.as_deref(), from.name.as_deref()]
                .into_iter()
                .flatten()
            {
                fold_into(part, &mut hay);
            }
        }
        for name in parsed.attachments.iter().filter_map(|a| a.name.as_deref()) {
            fold_into(name, &mut hay);
        }
        (0..self.0.len())
            .filter(|&i| !hay.contains(self.0[i].as_str()))
            .collect()
    }

    /// The words at `indexes`.
    fn pick(&self, indexes: &[usize]) -> Vec<&str> {
        indexes.iter().map(|&i| self.0[i].as_str()).collect()
    }

    /// `false` when `text` is ASCII and lacks one of the words at `wanted` (indexes into the
    /// words), which settles a non-match without folding `text`; `true` when unsure.
    fn may_occur(&self, text: &str, wanted: &[usize]) -> bool {
        !text.is_ascii()
            || self
                .all_occur(text.as_bytes(), wanted.iter().copied())
                .unwrap_or(true)
    }

    /// Whether every word at `wanted` occurs in `hay`, ASCII case-insensitively; `None` when
    /// the words have no such automaton (one is not ASCII).
    pub(super) fn all_occur(
        &self,
        hay: &[u8],
        wanted: impl Iterator<Item = usize>,
    ) -> Option<bool> {
        let any_case = self.1.as_ref()?;
        let mut needed = vec![false; self.0.len()];
        let mut left = 0;
        for i in wanted {
            if !needed[i] {
                needed[i] = true;
                left += 1;
            }
        }
        for found in any_case.find_overlapping_iter(hay) {
            if left == 0 {
                break;
            }
            let i = found.pattern().as_usize();
            if needed[i] {
                needed[i] = false;
                left -= 1;
            }
        }
        Some(left == 0)
    }
}

/// What one worker found.
#[derive(Default)]
struct Part {
    /// Matches read in full (content path), at most about `2 × keep` at any time.
    summaries: Vec<MessageSummary>,
    /// Matches not read (metadata path): indexes into the file list.
    unread: Vec<usize>,
    matched: usize,
    examined: usize,
    gaps: Gaps,
}

fn scan_folder(root: &Dir, req: &ScanRequest, words: Option<&Words>) -> Result<Page, BackendError> {
    let id = resolve_folder(root, &req.folder)?;
    let dir = folder_dir(root, &id)?;
    let files = list_files(&dir)?;
    // Content is read when a match depends on it or the order sorts by it.
    let reads_content =
        words.is_some() || req.filters.reads_content() || req.order.by == SortBy::Subject;
    let scan = Scan {
        dir: &dir,
        folder: &id,
        files: &files,
        req,
        words,
        prefilter: words.and_then(Prefilter::new),
        reads_content,
        expired: AtomicBool::new(false),
    };
    // Runs on the worker pool (`MaildirStore::blocking` installs it), so the splits do too.
    let parts: Vec<Part> = (0..files.len())
        .into_par_iter()
        .with_min_len(CLAIM)
        .fold(Part::default, |part, index| scan.visit(part, index))
        .collect();

    let mut page = Page {
        folder_total: Some(files.len()),
        page_size: Some(PAGE_SIZE),
        ..Page::default()
    };
    let mut summaries = Vec::new();
    let mut unread = Vec::new();
    for part in parts {
        page.matched += part.matched;
        page.examined += part.examined;
        page.gaps.merge(&part.gaps);
        summaries.extend(part.summaries);
        unread.extend(part.unread);
    }
    if !unread.is_empty() {
        // Metadata matches: pick the best `keep` by the order's key, which the file names hold
        // (delivery time, then id), and read only those.
        let key = |i: &usize| (files[*i].received, encode_id(&id, &files[*i].unique));
        unread.sort_by_cached_key(key);
        if req.order.direction == SortOrder::Desc {
            unread.reverse();
        }
        unread.truncate(req.keep);
        for i in unread {
            let file = &files[i];
            let summary = match read_file(&dir, file) {
                Ok(raw) => to_summary(&id, file, &mime::parse(&raw)),
                Err(err) => unread_summary(&id, file, &err),
            };
            if let Some(gap) = summary.gap {
                page.gaps.add(gap);
            }
            summaries.push(summary);
        }
    }
    keep_best(&mut summaries, req.order, req.keep);
    page.items = summaries;
    if scan.expired.load(Ordering::Relaxed) {
        page.truncated = true;
        page.timed_out = true;
        page.stop = Some(ScanStop::Deadline);
    }
    page.pages_scanned =
        u32::try_from(page.examined.div_ceil(PAGE_SIZE).max(1)).unwrap_or(u32::MAX);
    Ok(page)
}

/// Sorts by `order` and keeps the first `keep`.
fn keep_best(items: &mut Vec<MessageSummary>, order: Order, keep: usize) {
    items.sort_by(|a, b| order.compare(a, b));
    items.truncate(keep);
}

/// The shared state of one scan's workers.
struct Scan<'a> {
    dir: &'a Dir,
    folder: &'a str,
    files: &'a [MessageFile],
    req: &'a ScanRequest,
    words: Option<&'a Words>,
    prefilter: Option<Prefilter>,
    reads_content: bool,
    expired: AtomicBool,
}

impl Scan<'_> {
    /// One message into `part`, unless the deadline has passed.
    fn visit(&self, mut part: Part, index: usize) -> Part {
        if self.expired.load(Ordering::Relaxed) || Instant::now() >= self.req.budget.deadline {
            self.expired.store(true, Ordering::Relaxed);
            return part;
        }
        part.examined += 1;
        self.examine(index, &mut part);
        if part.summaries.len() > 2 * self.req.keep + CLAIM {
            keep_best(&mut part.summaries, self.req.order, self.req.keep);
        }
        part
    }

    fn examine(&self, index: usize, part: &mut Part) {
        let file = &self.files[index];
        let filters = &self.req.filters;
        if !filters.admits_metadata(file.is_seen(), secs_to_utc(file.received)) {
            return;
        }
        if !self.reads_content {
            part.matched += 1;
            part.unread.push(index);
            return;
        }
        // The words the headers lack, folded once per message (the HTML gate may need them
        // first, while the message is parsed).
        let missing = std::cell::OnceCell::new();
        let parsed = match read_file(self.dir, file) {
            // Provably no match: not parsed (see `prefilter` for why that is sound).
            Ok(raw)
                if self
                    .prefilter
                    .as_ref()
                    .zip(self.words)
                    .is_some_and(|(p, words)| !p.may_match(words, &raw)) =>
            {
                return;
            }
            Ok(raw) => match self.words {
                // An HTML body is rendered only when a word the headers lack may be in it.
                Some(words) => mime::parse_gated(&raw, &|head, source| {
                    let rest = missing.get_or_init(|| words.missing_indexes(head));
                    rest.is_empty() || html_may_hold(source, &words.pick(rest))
                }),
                None => mime::parse(&raw),
            },
            Err(err) => {
                // Counted whether or not it would match: a non-match in it is unproven.
                part.gaps.add(unread_gap(&err));
                return;
            }
        };
        if let Some(gap) = content_gap(&parsed) {
            // Counted whether or not it matches: a non-match in it is unproven.
            part.gaps.add(gap);
        }
        // The words first, on the parsed view: a summary is built only for a message they
        // match (most of a large folder, for a rare word, is not). The headers were folded
        // once, by the HTML gate, when the message has an HTML body.
        if let Some(words) = self.words
            && !matches_rest(
                words,
                &parsed,
                missing.get_or_init(|| words.missing_indexes(&parsed)),
            )
        {
            return;
        }
        let summary = to_summary(self.folder, file, &parsed);
        if !filters.matches(&summary) {
            return;
        }
        part.matched += 1;
        part.summaries.push(summary);
    }
}

/// [`matches_rest`] with the headers folded here (the reference path of the tests).
#[cfg(test)]
fn matches_words(words: &Words, parsed: &ParsedMessage) -> bool {
    matches_rest(words, parsed, &words.missing_indexes(parsed))
}

/// Header-first matching: the words the subject, sender and attachment names do not hold are
/// looked for in the whole body, streamed token by token: memory stays a token's whatever the
/// body's length (issue 36: a bound on the text searched left most real mailboxes unable to
/// prove absence). Only what the view itself lacks is a gap, recorded by `to_summary`.
/// `rest`: the indexes of the words the headers lack.
fn matches_rest(words: &Words, parsed: &ParsedMessage, rest: &[usize]) -> bool {
    if words.0.is_empty() {
        // A query with no alphanumeric word cannot prove anything, so it matches nothing.
        return false;
    }
    if rest.is_empty() {
        return true;
    }
    let body = parsed.body_text.as_str();
    if !words.may_occur(body, rest) {
        return false;
    }
    // A word matches inside one token (as in the folded headers, where tokens are joined by
    // spaces), so each token is looked at once and dropped.
    let mut left: Vec<&str> = words.pick(rest);
    each_token(body, Mode::Document, |token, _, _| {
        if !left.is_empty() {
            left.retain(|word| !token.contains(word));
        }
    });
    left.is_empty()
}

/// The scan's verdict on one message file for `query`, by the path a search takes: the raw-byte
/// prefilter, then the HTML-gated parse and header-first matching. `(prefilter let it through,
/// matched)`. Fuzz and test builds only: the one-extraction oracle (`crate::differential`)
/// holds it to what `get_message` shows.
#[cfg(any(test, fuzzing))]
pub(crate) fn scan_verdict(raw: &[u8], query: &str) -> (bool, bool) {
    let words = Words::new(query);
    if Prefilter::new(&words).is_some_and(|p| !p.may_match(&words, raw)) {
        return (false, false);
    }
    let missing = std::cell::OnceCell::new();
    let parsed = mime::parse_gated(raw, &|head, source| {
        let rest = missing.get_or_init(|| words.missing_indexes(head));
        rest.is_empty() || html_may_hold(source, &words.pick(rest))
    });
    let rest = missing.get_or_init(|| words.missing_indexes(&parsed));
    (true, matches_rest(&words, &parsed, rest))
}

/// Whether `raw` matches `words` by the full path (parse, then header-first matching): the
/// reference the prefilter's property test holds the shortcut to.
#[cfg(test)]
pub(super) fn matches_parsed(words: &Words, raw: &[u8]) -> bool {
    matches_words(words, &mime::parse(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A parsed message with `subject` and `body`.
    fn message(subject: &str, body: &str) -> ParsedMessage {
        ParsedMessage {
            subject: Some(subject.into()),
            body_text: body.into(),
            ..ParsedMessage::default()
        }
    }

    #[test]
    fn words_match_inside_tokens_across_header_and_body() {
        let words = Words::new("Relatório 2026");
        assert!(matches_words(&words, &message("relatorios", "ano 2026.")));
        assert!(!matches_words(&words, &message("relatorios", "ano 2025.")));
        assert!(!matches_words(&Words::new("?!"), &message("?!", "?!")));
        // A long body is matched whole (issue 36): a word at its very end is found.
        let long = format!("{} needle", "a ".repeat(1 << 20));
        assert!(matches_words(&Words::new("needle"), &message("s", &long)));
        assert!(!matches_words(&Words::new("needles"), &message("s", &long)));
        // The ASCII shortcut agrees with folding: case, and words inside longer tokens.
        assert!(matches_words(
            &Words::new("needle"),
            &message("s", "the NEEDLES here")
        ));
        assert!(!matches_words(
            &Words::new("needle"),
            &message("s", "nee dle")
        ));
        assert!(matches_words(&Words::new("ole"), &message("s", "Olé")));
    }

    proptest::proptest! {
        /// The ASCII shortcut never changes a verdict: matching equals folding the body and
        /// looking for every word.
        #[test]
        fn the_ascii_shortcut_agrees_with_folding(
            body in "[a-zA-Z0-9 <>.é-]{0,60}",
            query in proptest::sample::select(vec!["ab", "AB c", "é", "a-b", "b1"]),
        ) {
            let words = Words::new(query);
            let mut folded = String::new();
            fold_into(&body, &mut folded);
            let expected = !words.0.is_empty() && words.0.iter().all(|w| folded.contains(w.as_str()));
            proptest::prop_assert_eq!(matches_words(&words, &message("-", &body)), expected);
        }
    }
}
