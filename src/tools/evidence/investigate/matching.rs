//! Signal matching for one message of `investigate_documents`: its metadata (subject, body,
//! sender address and name) and attachment names become [`MessageEvidence`], and the evidence
//! becomes a classified match that shows the message as metadata only.
//!
//! Invariant: signals never bridge fields; a header field is matched on at most 65,536 chars,
//! the body on all a reader is shown (`mime::MAX_BODY_CHARS`; a cut is recorded); only a proposal id in an attachment name, or an equal attachment name beside
//! an identity signal in the metadata, confirms, so content and word matches stay candidates.
//! Called by the folder scan in [`super`]; [`super::attachments`] adds content evidence between
//! the two steps.

use crate::backends::model::{ContentGap, MessageSummary};
use crate::tools::args::InvestigationFolder;
use crate::tools::evidence::signals::{self, Haystack, NameMatch, Signals};
use crate::tools::evidence::{MatchedSignalsOut, NameMatchOut, any_kind, push_once, union};
use crate::tools::output::{self, AddressOut, bounded};

use super::listing::Listing;
use super::output::{
    Classification, FolderReason, InvestigationAttachmentOut, InvestigationConfirmation,
    InvestigationMatchOut, InvestigationMessageOut,
};

/// Longest header field (Unicode scalar values) that is matched.
const MAX_FIELD_CHARS: usize = 65_536;
/// Longest body matched: the whole body a reader is shown (issue 36: what `get_message`
/// shows is what every matcher searches).
const MAX_BODY_FIELD_CHARS: usize = crate::mime::MAX_BODY_CHARS;
/// Attachments shown per message (reference §4.2).
const SHOWN_ATTACHMENTS: usize = output::SUMMARY_ATTACHMENTS;

/// What one message holds of the signals, by where it was found.
pub(super) struct MessageEvidence {
    pub(super) in_meta: Vec<bool>,
    pub(super) in_names: Vec<bool>,
    pub(super) in_content: Vec<bool>,
    /// (requested name, attachment id, how), each requested name once (strongest first met).
    pub(super) names: Vec<(String, String, NameMatch)>,
    pub(super) content_ids: Vec<String>,
}

impl MessageEvidence {
    pub(super) fn found(&self) -> Vec<bool> {
        union(&union(&self.in_meta, &self.in_names), &self.in_content)
    }
}

/// Matches one message's metadata and attachment names (no content).
pub(super) fn metadata_evidence(
    message: &MessageSummary,
    body: Option<&str>,
    listing: &Listing,
    set: &Signals,
    reasons: &mut Vec<FolderReason>,
) -> MessageEvidence {
    let mut in_meta = set.none_found();
    let from = message.from.as_ref();
    // The body (fetched per message; a backend flags a body it cut as a gap) is searched
    // rather than only its preview: a signal in a body the preview cuts off is present all the
    // same.
    // The body lacks what a bound cut or a part no matcher reads held.
    let body_cut = matches!(
        message.gap,
        Some(ContentGap::Body | ContentGap::Undecodable | ContentGap::UnknownPart)
    );
    let body = body.unwrap_or(message.preview.as_str());
    let fields = [
        (message.subject.as_deref(), false, MAX_FIELD_CHARS),
        (Some(body), body_cut, MAX_BODY_FIELD_CHARS),
        (
            from.and_then(|f| f.address.as_deref()),
            false,
            MAX_FIELD_CHARS,
        ),
        (from.and_then(|f| f.name.as_deref()), false, MAX_FIELD_CHARS),
    ];
    for (field, already_cut, max_chars) in fields {
        let Some(field) = field else { continue };
        let (prefix, cut) = signals::prefix_chars(field, max_chars);
        if cut {
            push_once(reasons, FolderReason::MessageTextTruncated);
        }
        set.scan(&Haystack::new(prefix, cut || already_cut), &mut in_meta);
    }
    let mut in_names = set.none_found();
    let mut names: Vec<(String, String, NameMatch)> = Vec::new();
    for a in &listing.items {
        let Some(name) = a.name.as_deref().filter(|n| !n.trim().is_empty()) else {
            continue;
        };
        let (hay, _) = Haystack::bounded(name, signals::MAX_NAME_CHARS);
        set.scan(&hay, &mut in_names);
        for (requested, how) in set.match_names(name) {
            match names.iter_mut().find(|(r, _, _)| r == requested) {
                Some(entry) if how.is_equality() && !entry.2.is_equality() => {
                    *entry = (requested.to_owned(), a.id.clone(), how);
                }
                Some(_) => {}
                None => names.push((requested.to_owned(), a.id.clone(), how)),
            }
        }
    }
    MessageEvidence {
        in_content: set.none_found(),
        in_meta,
        in_names,
        names,
        content_ids: Vec::new(),
    }
}

/// Matches one message on its metadata and names; `None` when no signal occurs in it.
#[cfg(test)]
fn match_message(
    folder: InvestigationFolder,
    message: &MessageSummary,
    listing: &Listing,
    set: &Signals,
    reasons: &mut Vec<FolderReason>,
) -> Option<InvestigationMatchOut> {
    let evidence = metadata_evidence(message, None, listing, set, reasons);
    into_match(folder, message, listing, set, evidence)
}

/// The match of one message from its evidence; `None` when no signal occurs in it.
pub(super) fn into_match(
    folder: InvestigationFolder,
    message: &MessageSummary,
    listing: &Listing,
    set: &Signals,
    ev: MessageEvidence,
) -> Option<InvestigationMatchOut> {
    let names: Vec<&str> = ev.names.iter().map(|(r, _, _)| r.as_str()).collect();
    let matched = MatchedSignalsOut::collect(set, &ev.found(), &names);
    if matched.is_empty() {
        return None;
    }
    let mut confirmations = Vec::new();
    if any_kind(set, &ev.in_names, |k| k == signals::Kind::ProposalId) {
        confirmations.push(InvestigationConfirmation::ProposalIdInAttachmentName);
    }
    // Only equality (full name or name without extension) may confirm, never a word match.
    let equal = ev.names.iter().any(|(_, _, how)| how.is_equality());
    if equal && any_kind(set, &ev.in_meta, signals::Kind::is_identity) {
        confirmations.push(InvestigationConfirmation::RequestedAttachmentNameMatch);
    }
    Some(InvestigationMatchOut {
        folder: folder.into(),
        classification: if confirmations.is_empty() {
            Classification::CandidateReview
        } else {
            Classification::Confirmed
        },
        message: project(message, listing),
        matched_signals: matched,
        confirmation_reasons: confirmations,
        name_matches: ev
            .names
            .into_iter()
            .map(|(requested, attachment_id, matched_by)| NameMatchOut {
                requested,
                attachment_id,
                matched_by,
            })
            .collect(),
        content_match_attachment_ids: ev.content_ids,
    })
}

fn project(m: &MessageSummary, listing: &Listing) -> InvestigationMessageOut {
    let attachments = listing
        .items
        .iter()
        .take(SHOWN_ATTACHMENTS)
        .map(|a| {
            let name = a.name.as_deref().unwrap_or("");
            InvestigationAttachmentOut {
                id: a.id.clone(),
                name: bounded(name, output::ATTACHMENT_NAME_CHARS),
                name_truncated: name.chars().count() > output::ATTACHMENT_NAME_CHARS,
                content_type: bounded(&a.content_type, output::CONTENT_TYPE_CHARS),
                size: a.size,
                is_inline: a.is_inline,
            }
        })
        .collect();
    InvestigationMessageOut {
        id: m.id.clone(),
        folder_id: m.folder_id.clone(),
        subject: bounded(m.subject.as_deref().unwrap_or(""), output::SUBJECT_CHARS),
        from: m.from.as_ref().map(AddressOut::from_mailbox),
        received_date_time: m.received.map(crate::tools::dates::iso_z),
        is_read: m.is_read,
        has_attachments: m.has_attachments,
        attachment_count: listing.items.len(),
        attachments,
        attachment_names_truncated: listing.partial || listing.items.len() > SHOWN_ATTACHMENTS,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::search::engine;
    use crate::tools::evidence::investigate::listing::cap_listing;
    use crate::tools::evidence::investigate::listing::tests::{limits, meta};
    use crate::tools::evidence::investigate::output::FolderName;

    fn signals(json: Value) -> Signals {
        let c: crate::tools::args::InvestigationCriteria =
            serde_json::from_value(json).expect("criteria parse");
        Signals::new(&c.signals())
    }

    #[test]
    fn full_name_is_matched_while_the_projection_is_cut() {
        let set = signals(json!({"proposalIds": ["PROP-7001"]}));
        let name = format!("{} PROP-7001.pdf", "x".repeat(400));
        let mut reasons = Vec::new();
        let listing = cap_listing(vec![meta("att-0", Some(&name))], &limits(50), &mut reasons);
        let c = engine::tests::candidate("m1", "no ids here");
        let m = match_message(InvestigationFolder::Inbox, &c, &listing, &set, &mut reasons)
            .expect("matched");
        assert_eq!(m.classification, Classification::Confirmed);
        assert!(m.message.attachments[0].name_truncated);
        assert!(m.message.attachments[0].name.chars().count() <= 303);
        assert_eq!(reasons, [FolderReason::AttachmentNameTruncated]);
    }

    #[test]
    fn signals_never_bridge_fields_and_long_fields_are_flagged() {
        let set = signals(json!({"clients": ["Orchard Bakery Ltd"]}));
        let empty = Listing {
            items: Vec::new(),
            clean: true,
            partial: false,
        };
        let mut c = engine::tests::candidate("m1", "Orchard");
        c.preview = "Bakery Ltd".into();
        let mut reasons = Vec::new();
        assert!(
            match_message(InvestigationFolder::Inbox, &c, &empty, &set, &mut reasons).is_none()
        );
        assert!(reasons.is_empty());

        // A header field is matched on its first 65,536 chars, the body whole (issue 36).
        let long = format!("{} Orchard Bakery Ltd", "y ".repeat(40_000));
        c.subject = Some(long.clone());
        c.preview = String::new();
        let m = match_message(InvestigationFolder::Inbox, &c, &empty, &set, &mut reasons);
        assert!(
            m.is_none(),
            "the signal lies beyond the subject's 65,536-char cut"
        );
        assert_eq!(reasons, [FolderReason::MessageTextTruncated]);
        c.subject = Some("Orchard".into());
        c.preview = long;
        let mut reasons = Vec::new();
        let m = match_message(InvestigationFolder::Inbox, &c, &empty, &set, &mut reasons);
        assert!(m.is_some(), "a body is matched whole");
        assert!(reasons.is_empty(), "{reasons:?}");

        // A metadata-only identity match is a candidate; a keyword alone too.
        c.preview = "Orchard Bakery Ltd renewal".into();
        let mut reasons = Vec::new();
        let m = match_message(InvestigationFolder::Archive, &c, &empty, &set, &mut reasons)
            .expect("matched");
        assert_eq!(m.classification, Classification::CandidateReview);
        assert_eq!(m.folder, FolderName::Archive);
        let kw = signals(json!({"keywords": ["renewal"]}));
        let m = match_message(InvestigationFolder::Inbox, &c, &empty, &kw, &mut reasons)
            .expect("matched");
        assert_eq!(m.classification, Classification::CandidateReview);
    }

    #[test]
    fn a_partial_proposal_id_in_a_name_is_not_a_confirmation() {
        let set = signals(json!({"proposalIds": ["PROP-1001"]}));
        let mut reasons = Vec::new();
        let listing = cap_listing(
            vec![meta("att-0", Some("PROP-10012-draft.pdf"))],
            &limits(50),
            &mut reasons,
        );
        let c = engine::tests::candidate("m1", "draft");
        assert!(
            match_message(InvestigationFolder::Inbox, &c, &listing, &set, &mut reasons).is_none()
        );
    }
}
