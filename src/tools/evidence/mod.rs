//! Document evidence: `inspect_attachment_evidence` ([`inspect`]) and `investigate_documents`
//! ([`investigate`]), the reference's §5.10 and §5.9 with mailgate's `keywords` signal list.
//!
//! Purpose: tell a caller *where* a document is and *how sure* that is, without handing it
//! message bodies, previews, attachment text or bytes. Both tools return evidence metadata only
//! (statuses, stable reason codes, which signals matched, coverage); sender-controlled strings
//! (subjects, senders, attachment names) are bounded and the whole answer is framed untrusted.
//!
//! Invariants: the alias is resolved before anything else (an unknown alias is `UNKNOWN_MAILBOX`
//! whatever else is wrong); a negative answer (`NOT_FOUND`, `NOT_CONFIRMED`) is only given after
//! a complete scan or a complete validation pipeline, which includes reading the text of every
//! attachment that could hold a signal; a confirmation that rests on a name alone says so; a
//! keyword match alone is never a confirmation. Signal matching is in [`signals`].
//!
//! Callers: the read family's tool table (`tools/read.rs`).

mod from_index;
#[cfg(test)]
mod honesty_tests;
mod inspect;
mod investigate;
pub(crate) mod signals;

use schemars::JsonSchema;
use serde::Serialize;

pub(crate) use inspect::{EvidenceOut, inspect_attachment_evidence};
pub(crate) use investigate::{InvestigateOut, investigate_documents};

/// Which of the caller's signals matched, per list, each once, in request order.
#[derive(Clone, Debug, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MatchedSignalsOut {
    pub(crate) proposal_ids: Vec<String>,
    pub(crate) clients: Vec<String>,
    pub(crate) insurers: Vec<String>,
    pub(crate) attachment_names: Vec<String>,
    pub(crate) keywords: Vec<String>,
}

impl MatchedSignalsOut {
    /// Collects the signals marked in `found` (indices into `set`) plus the exact `names`.
    fn collect(set: &signals::Signals, found: &[bool], names: &[&str]) -> Self {
        let mut out = MatchedSignalsOut::default();
        for i in (0..set.len()).filter(|&i| found[i]) {
            let list = match set.kind(i) {
                signals::Kind::ProposalId => &mut out.proposal_ids,
                signals::Kind::Client => &mut out.clients,
                signals::Kind::Insurer => &mut out.insurers,
                signals::Kind::Keyword => &mut out.keywords,
            };
            list.push(set.text(i).to_owned());
        }
        for n in names {
            if !out.attachment_names.iter().any(|e| e == n) {
                out.attachment_names.push((*n).to_owned());
            }
        }
        out
    }

    fn is_empty(&self) -> bool {
        self.proposal_ids.is_empty()
            && self.clients.is_empty()
            && self.insurers.is_empty()
            && self.attachment_names.is_empty()
            && self.keywords.is_empty()
    }
}

/// How one requested attachment name matched one attachment (see `attachmentNames`).
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NameMatchOut {
    // The requested name as given; `EXACT` (full name) or `STEM` (name without extension)
    // may confirm, `WORDS` never does.
    pub(crate) requested: String,
    pub(crate) attachment_id: String,
    pub(crate) matched_by: signals::NameMatch,
}

/// Pushes `item` unless already present (reason lists are deduplicated, first occurrence kept).
fn push_once<T: PartialEq>(list: &mut Vec<T>, item: T) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// `found[i] || other[i]` element-wise.
fn union(a: &[bool], b: &[bool]) -> Vec<bool> {
    a.iter().zip(b).map(|(x, y)| *x || *y).collect()
}

/// Whether any signal of `kind` (per `pred`) is marked in `found`.
fn any_kind(set: &signals::Signals, found: &[bool], pred: impl Fn(signals::Kind) -> bool) -> bool {
    (0..set.len()).any(|i| found[i] && pred(set.kind(i)))
}
