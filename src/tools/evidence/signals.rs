//! Signal matching for the evidence tools (reference §5.9 step 3, §5.10 step 7).
//!
//! Purpose: decide which of the caller's signals (proposal ids, clients, insurers, keywords)
//! occur in a haystack (a subject, a sender, an attachment name, extracted text), and how a
//! requested file name matches an attachment name ([`Signals::match_names`]: the full name or
//! the name without extension, compared after the shared normalization and whitespace
//! collapsing, may confirm; the requested name's words in order within the name only make a
//! candidate).
//!
//! Normalisation and tokens: [`crate::text`]'s, the one every matcher uses (characters of the
//! scripts written without spaces are tokens one by one, so a signal is found inside an unspaced
//! run). A signal matches a haystack when its *compact* form (its tokens
//! concatenated) occurs in the haystack's concatenated tokens starting and ending on token
//! boundaries. That covers both of the reference's rules at once: a contiguous token sequence
//! (`prop 1001`) and the compact spelling (`PROP1001`), while a longer id (`PROP-10012`) or a
//! prefix glued to a token (`XPROP-1001`) does not match. Each haystack is matched on its own, so
//! a multi-word signal never bridges two fields.
//!
//! Invariant: cost is linear in the haystack (one Aho–Corasick pass over the concatenated tokens,
//! overlapping matches so that no boundary-aligned occurrence hides behind an unaligned one, with
//! an early exit once every pattern has been seen) plus the number of pattern hits, which is at
//! most the pattern count per byte. A haystack that was cut by a limit does not end on a
//! boundary: its last (possibly partial) token is dropped, so a cut never manufactures a match.
//!
//! Callers: the evidence tools only.

use std::collections::HashMap;

use aho_corasick::AhoCorasick;

/// Longest attachment name (Unicode scalar values) that is matched; longer names are cut for
/// token matching and never equal a requested name (reference §5.9 step 3).
pub(crate) const MAX_NAME_CHARS: usize = 4096;

/// The class of a signal, which decides where it may match and what it may confirm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    ProposalId,
    Client,
    Insurer,
    Keyword,
}

impl Kind {
    /// Identity signals can confirm; keywords only ever make a candidate.
    pub(crate) fn is_identity(self) -> bool {
        !matches!(self, Kind::Keyword)
    }
}

/// A haystack after normalisation.
pub(crate) struct Haystack {
    concat: String,
    /// `boundary[i]` is true when byte offset `i` of `concat` starts or ends a token.
    boundary: Vec<bool>,
}

impl Haystack {
    /// Normalises `text`; `cut` says the text is a prefix of a longer one (see the module doc).
    pub(crate) fn new(text: &str, cut: bool) -> Self {
        let mut concat = String::with_capacity(text.len());
        let mut starts = Vec::new();
        let mut last_end = 0;
        crate::text::each_token(text, crate::text::Mode::Units, |token, _, end| {
            starts.push(concat.len());
            concat.push_str(token);
            last_end = end;
        });
        // A cut text whose last token runs to its end (nothing visible after it) may have lost
        // the rest of that token.
        if cut
            && !starts.is_empty()
            && crate::text::normalized(&text[last_end..]).is_empty()
            && let Some(last) = starts.pop()
        {
            concat.truncate(last);
        }
        let mut boundary = vec![false; concat.len() + 1];
        for s in starts {
            boundary[s] = true;
        }
        // The end of the (kept) text ends the last token; an empty haystack has no token at all.
        if !concat.is_empty() {
            boundary[concat.len()] = true;
        }
        Self { concat, boundary }
    }

    /// `text` cut to `max` Unicode scalar values, normalised; also says whether it was cut.
    pub(crate) fn bounded(text: &str, max: usize) -> (Self, bool) {
        let (prefix, cut) = prefix_chars(text, max);
        (Self::new(prefix, cut), cut)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.concat.is_empty()
    }
}

/// At most `max` leading Unicode scalar values of `text`, and whether anything was left out.
pub(crate) fn prefix_chars(text: &str, max: usize) -> (&str, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (&text[..at], true),
        None => (text, false),
    }
}

/// The compact form of a signal: its normalised tokens concatenated.
fn compact(signal: &str) -> String {
    Haystack::new(signal, false).concat
}

/// The caller's signals compiled once per call.
pub(crate) struct Signals {
    /// (kind, the caller's string) per signal, in request order.
    entries: Vec<(Kind, String)>,
    /// `None` when no signal has a token (nothing can match).
    automaton: Option<AhoCorasick>,
    /// Pattern id → the signals sharing that compact form.
    pattern_signals: Vec<Vec<usize>>,
    /// Requested attachment names: (the caller's string, its comparison key).
    names: Vec<(String, Option<String>)>,
    /// The requested names' word matcher (see [`Signals::match_names`]).
    name_automaton: Option<AhoCorasick>,
    /// Pattern id → indices into `names` sharing that compact form.
    name_patterns: Vec<Vec<usize>>,
}

/// How a requested attachment name matched an attachment's name (compared ignoring case,
/// accents, invisible characters and extra whitespace).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum NameMatch {
    // Equal to the full name.
    Exact,
    // Equal to the name without its extension.
    Stem,
    // Its words occur in order in the name, separators ignored: a candidate only.
    Words,
}

impl NameMatch {
    /// Exact and stem equality may confirm; a word match never does.
    pub(crate) fn is_equality(self) -> bool {
        !matches!(self, NameMatch::Words)
    }
}

impl Signals {
    /// Builds the matcher from the request's lists. Duplicates are kept once (the first).
    pub(crate) fn new(s: &crate::tools::args::Signals) -> Self {
        let mut entries: Vec<(Kind, String)> = Vec::new();
        for (kind, list) in [
            (Kind::ProposalId, &s.proposal_ids),
            (Kind::Client, &s.clients),
            (Kind::Insurer, &s.insurers),
            (Kind::Keyword, &s.keywords),
        ] {
            for v in list {
                if !entries.iter().any(|(k, e)| *k == kind && e == v) {
                    entries.push((kind, v.clone()));
                }
            }
        }
        let mut by_compact: HashMap<String, usize> = HashMap::new();
        let mut patterns: Vec<String> = Vec::new();
        let mut pattern_signals: Vec<Vec<usize>> = Vec::new();
        for (i, (_, v)) in entries.iter().enumerate() {
            let c = compact(v);
            if c.is_empty() {
                continue;
            }
            let id = *by_compact.entry(c.clone()).or_insert_with(|| {
                patterns.push(c);
                pattern_signals.push(Vec::new());
                patterns.len() - 1
            });
            pattern_signals[id].push(i);
        }
        // Patterns are at most 25 × 4 strings of ≤ 200 chars, far below any automaton limit; a
        // build failure would only make every signal unmatched, which fails towards "not found
        // yet" (never towards a false confirmation).
        let automaton = if patterns.is_empty() {
            None
        } else {
            AhoCorasick::new(&patterns).ok()
        };
        let mut names: Vec<(String, Option<String>)> = Vec::new();
        for n in &s.attachment_names {
            if !names.iter().any(|(e, _)| e == n) {
                names.push((n.clone(), name_key(n)));
            }
        }
        let mut name_compacts: Vec<String> = Vec::new();
        let mut name_patterns: Vec<Vec<usize>> = Vec::new();
        for (i, (n, _)) in names.iter().enumerate() {
            let c = compact(n);
            if c.is_empty() {
                continue;
            }
            match name_compacts.iter().position(|e| *e == c) {
                Some(id) => name_patterns[id].push(i),
                None => {
                    name_compacts.push(c);
                    name_patterns.push(vec![i]);
                }
            }
        }
        // As above: a build failure only loses word matches (equality still works).
        let name_automaton = if name_compacts.is_empty() {
            None
        } else {
            AhoCorasick::new(&name_compacts).ok()
        };
        Self {
            entries,
            automaton,
            pattern_signals,
            names,
            name_automaton,
            name_patterns,
        }
    }

    /// Whether any signal can match attachment *content* (every kind but attachment names).
    pub(crate) fn reads_content(&self) -> bool {
        self.automaton.is_some()
    }

    /// Whether any signal can match anything at all (a signal of punctuation only cannot).
    pub(crate) fn any_matchable(&self) -> bool {
        self.automaton.is_some() || self.names.iter().any(|(_, k)| k.is_some())
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn kind(&self, i: usize) -> Kind {
        self.entries[i].0
    }

    pub(crate) fn text(&self, i: usize) -> &str {
        &self.entries[i].1
    }

    /// A fresh "found" vector for [`Signals::scan`].
    pub(crate) fn none_found(&self) -> Vec<bool> {
        vec![false; self.entries.len()]
    }

    /// Marks in `found` every signal that occurs in `hay`.
    pub(crate) fn scan(&self, hay: &Haystack, found: &mut [bool]) {
        if let Some(ac) = &self.automaton {
            scan_with(ac, &self.pattern_signals, hay, found);
        }
    }

    /// Whether every content signal (see [`Signals::reads_content`]) is marked in `found`.
    pub(crate) fn all_content_found(&self, found: &[bool]) -> bool {
        self.pattern_signals.iter().flatten().all(|&s| found[s])
    }

    /// The requested attachment names that match `name`, each once with the strongest way it
    /// matched: equal to the full name, equal to the name without its extension (both compared
    /// by [`name_key`]), or its words in order within the name (the token matcher of the other
    /// signals, so separators, case and accents are ignored and a word is never cut).
    pub(crate) fn match_names(&self, name: &str) -> Vec<(&str, NameMatch)> {
        let mut out: Vec<(&str, NameMatch)> = Vec::new();
        if self.names.is_empty() {
            return out;
        }
        let key = name_key(name);
        let stem_key = stem(name).and_then(name_key);
        let mut words = vec![false; self.names.len()];
        if let Some(ac) = &self.name_automaton {
            let (hay, _) = Haystack::bounded(name, MAX_NAME_CHARS);
            scan_with(ac, &self.name_patterns, &hay, &mut words);
        }
        for (i, (n, k)) in self.names.iter().enumerate() {
            let how = match k {
                Some(k) if key.as_deref() == Some(k.as_str()) => NameMatch::Exact,
                // Only a request without an extension of its own: `a.pdf` must not equal
                // `a.pdf.exe` (a double extension disguises a file's type).
                Some(k) if stem_key.as_deref() == Some(k.as_str()) && stem(n).is_none() => {
                    NameMatch::Stem
                }
                _ if words[i] => NameMatch::Words,
                _ => continue,
            };
            out.push((n.as_str(), how));
        }
        out
    }

    pub(crate) fn has_names(&self) -> bool {
        !self.names.is_empty()
    }

    /// The requested attachment names, each once, in request order.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(|(n, _)| n.as_str())
    }
}

/// Marks in `found` the targets of every pattern of `ac` that occurs in `hay` on token
/// boundaries (`targets[pattern]` lists them), stopping once every pattern was seen.
fn scan_with(ac: &AhoCorasick, targets: &[Vec<usize>], hay: &Haystack, found: &mut [bool]) {
    if hay.is_empty() {
        return;
    }
    let mut pending: Vec<bool> = targets
        .iter()
        .map(|t| t.iter().any(|&s| !found[s]))
        .collect();
    let mut remaining = pending.iter().filter(|p| **p).count();
    if remaining == 0 {
        return;
    }
    for m in ac.find_overlapping_iter(hay.concat.as_bytes()) {
        let id = m.pattern().as_usize();
        if !pending[id] || !hay.boundary[m.start()] || !hay.boundary[m.end()] {
            continue;
        }
        pending[id] = false;
        for &s in &targets[id] {
            found[s] = true;
        }
        remaining -= 1;
        if remaining == 0 {
            return;
        }
    }
}

/// `name` without its last extension (`a.b.pdf` → `a.b`); `None` when it has none (no dot, a
/// leading dot only, or an "extension" holding whitespace).
fn stem(name: &str) -> Option<&str> {
    let trimmed = name.trim();
    let (stem, ext) = trimmed.rsplit_once('.')?;
    (!stem.trim().is_empty() && !ext.is_empty() && !ext.contains(char::is_whitespace))
        .then_some(stem)
}

/// The comparison key of an attachment name: [`crate::text::normalized`] (the one normalization
/// of every matcher: compatibility forms, case folding, marks and invisible characters dropped),
/// whitespace runs collapsed to one space, trimmed. `None` for a blank name or one over [`MAX_NAME_CHARS`] (never equal).
pub(crate) fn name_key(name: &str) -> Option<String> {
    if name.chars().count() > MAX_NAME_CHARS {
        return None;
    }
    let normalized = crate::text::normalized(name);
    let key = normalized.split_whitespace().collect::<Vec<_>>().join(" ");
    (!key.is_empty()).then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::args;

    fn signals(kind: Kind, list: &[&str]) -> Signals {
        let v: Vec<String> = list.iter().map(|s| (*s).to_owned()).collect();
        let mut s = args::Signals::default();
        match kind {
            Kind::ProposalId => s.proposal_ids = v,
            Kind::Client => s.clients = v,
            Kind::Insurer => s.insurers = v,
            Kind::Keyword => s.keywords = v,
        }
        Signals::new(&s)
    }

    fn hits(s: &Signals, text: &str) -> Vec<String> {
        let mut found = s.none_found();
        s.scan(&Haystack::new(text, false), &mut found);
        (0..s.len())
            .filter(|&i| found[i])
            .map(|i| s.text(i).to_owned())
            .collect()
    }

    #[test]
    fn proposal_id_token_and_compact_forms() {
        let s = signals(Kind::ProposalId, &["PROP-1001"]);
        for yes in [
            "PROP-1001-orchard-bakery.pdf",
            "re: prop 1001",
            "PROP1001",
            "(prop_1001)",
            "Proposal PROP-1001.",
        ] {
            assert_eq!(hits(&s, yes), ["PROP-1001"], "{yes}");
        }
        for no in [
            "PROP-10012",
            "XPROP-1001",
            "PROP-100",
            "prop 10 01x",
            "PROP-1002",
            "",
        ] {
            assert!(hits(&s, no).is_empty(), "{no}");
        }
    }

    #[test]
    fn compact_signal_matches_spaced_text_and_vice_versa() {
        let s = signals(Kind::ProposalId, &["PROP1001"]);
        assert_eq!(hits(&s, "PROP-1001"), ["PROP1001"]);
        assert!(hits(&s, "PROP-10012").is_empty());
    }

    #[test]
    fn diacritics_case_and_punctuation_fold() {
        let s = signals(Kind::Client, &["Harbour Lights Café Ltd"]);
        assert_eq!(hits(&s, "HARBOUR LIGHTS CAFE LTD premium").len(), 1);
        assert_eq!(hits(&s, "harbour-lights-café-ltd").len(), 1);
        assert!(hits(&s, "Harbour Lights Cafeteria Ltd").is_empty());
    }

    #[test]
    fn overlapping_occurrences_are_not_hidden() {
        // "aa" first occurs at byte 0 (ending mid-token), the aligned occurrence starts at 1.
        let s = signals(Kind::Keyword, &["aa"]);
        assert_eq!(hits(&s, "a aa"), ["aa"]);
        assert!(hits(&s, "aaa").is_empty());
    }

    #[test]
    fn punctuation_only_signal_matches_nothing() {
        let s = signals(Kind::Keyword, &["--", "  "]);
        assert!(!s.any_matchable());
        assert!(hits(&s, "-- --").is_empty());
    }

    #[test]
    fn a_cut_haystack_does_not_end_on_a_boundary() {
        let s = signals(Kind::ProposalId, &["PROP-1001"]);
        let (hay, cut) = Haystack::bounded("see PROP-10012", 13);
        assert!(cut);
        let mut found = s.none_found();
        s.scan(&hay, &mut found);
        assert!(!found[0], "the cut made PROP-1001 out of PROP-10012");
        let (hay, cut) = Haystack::bounded("see PROP-1001 now", 13);
        assert!(cut);
        let mut found = s.none_found();
        s.scan(&hay, &mut found);
        assert!(!found[0], "the last token of a cut text is not trusted");
        let (hay, cut) = Haystack::bounded("see PROP-1001 now", 14);
        assert!(cut);
        let mut found = s.none_found();
        s.scan(&hay, &mut found);
        assert!(found[0]);
    }

    #[test]
    fn several_signals_one_pass_and_shared_compact_forms() {
        let a = args::Signals {
            proposal_ids: vec!["PROP-1001".into(), "prop 1001".into(), "PROP-2042".into()],
            clients: vec!["Orchard Bakery Ltd".into()],
            keywords: vec!["renewal".into()],
            ..Default::default()
        };
        let s = Signals::new(&a);
        let found = hits(&s, "Orchard Bakery Ltd renewal - proposal PROP-1001");
        assert_eq!(
            found,
            ["PROP-1001", "prop 1001", "Orchard Bakery Ltd", "renewal"]
        );
    }

    #[test]
    fn bounded_on_a_huge_field_stays_fast_and_correct() {
        let a = args::Signals {
            proposal_ids: (0..25).map(|i| format!("PROP-{i:04}")).collect(),
            keywords: (0..25).map(|i| "a".repeat(i + 1)).collect(),
            ..Default::default()
        };
        let s = Signals::new(&a);
        let huge = "a".repeat(65_536);
        let (hay, _) = Haystack::bounded(&huge, 65_536);
        let mut found = s.none_found();
        s.scan(&hay, &mut found);
        assert!(
            found.iter().all(|f| !f),
            "one 65536-char token matches none"
        );
    }

    fn names(s: &Signals, name: &str) -> Vec<(String, NameMatch)> {
        s.match_names(name)
            .into_iter()
            .map(|(n, how)| (n.to_owned(), how))
            .collect()
    }

    #[test]
    fn attachment_names_match_full_name_stem_or_words_after_folding() {
        let a = args::Signals {
            attachment_names: vec![
                "PROP-1001-orchard-bakery.pdf".into(),
                "Ａ  b.pdf".into(),
                "premium-schedule".into(),
                "premium-schedule-2026".into(),
            ],
            ..Default::default()
        };
        let s = Signals::new(&a);
        let exact = |n: &str| (n.to_owned(), NameMatch::Exact);
        assert_eq!(
            names(&s, "  prop-1001-ORCHARD-bakery.pdf "),
            [exact("PROP-1001-orchard-bakery.pdf")]
        );
        assert_eq!(names(&s, "a b.PDF"), [exact("Ａ  b.pdf")]);
        // The issue-9 case: a name without its extension, and a word-aligned part of a name.
        assert_eq!(
            names(&s, "Premium-Schedule-2026.xlsx"),
            [
                ("premium-schedule".to_owned(), NameMatch::Words),
                ("premium-schedule-2026".to_owned(), NameMatch::Stem),
            ]
        );
        // Separators only matter for equality: a different one is a word match (candidate).
        assert_eq!(
            names(&s, "PROP-1001 orchard bakery.pdf"),
            [("PROP-1001-orchard-bakery.pdf".to_owned(), NameMatch::Words)]
        );
        assert_eq!(
            names(&s, "PROP-1001-orchard-bakery.pdf.exe"),
            [("PROP-1001-orchard-bakery.pdf".to_owned(), NameMatch::Words)]
        );
        // A word is never cut: "schedules" is not "schedule".
        assert!(names(&s, "premium-schedules.xlsx").is_empty());
        assert!(names(&s, "   ").is_empty());
        assert!(!NameMatch::Words.is_equality() && NameMatch::Stem.is_equality());
        let longest = "x".repeat(MAX_NAME_CHARS);
        assert!(name_key(&longest).is_some());
        assert!(
            name_key(&format!("{longest}y")).is_none(),
            "over 4096 never equal"
        );
        assert_eq!(stem(".bashrc"), None);
        assert_eq!(stem("a.tar.gz"), Some("a.tar"));
        assert_eq!(stem("report. final"), None);
    }

    proptest::proptest! {
        /// A signal always matches a text that contains it verbatim surrounded by spaces.
        #[test]
        fn a_signal_matches_text_containing_it(
            signal in "\\PC{1,40}",
            before in "\\PC{0,60}",
            after in "\\PC{0,60}",
        ) {
            proptest::prop_assume!(!compact(&signal).is_empty());
            let s = signals(Kind::Client, &[signal.as_str()]);
            let text = format!("{before} {signal} {after}");
            proptest::prop_assert_eq!(hits(&s, &text), vec![signal.clone()]);
        }

        /// Appending a digit to a numeric id never yields a match for the shorter id.
        #[test]
        fn a_longer_id_is_not_the_id(n in 0u32..100_000, d in 0u32..10, pre in "[a-z ]{0,20}") {
            let s = signals(Kind::ProposalId, &[format!("PROP-{n}").as_str()]);
            let text = format!("{pre} PROP-{n}{d} ");
            proptest::prop_assert!(hits(&s, &text).is_empty());
        }
    }
}
