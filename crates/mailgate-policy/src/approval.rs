//! A person's approval of one exact message (issue 38, item 1): what binds "yes, send this" to
//! the message it was given for, so that a changed recipient, body, caller or policy, a late
//! answer, or a second use finds nothing to redeem.
//!
//! Invariants:
//! - A [`MessageDigest`] covers every part of a [`Proposal`] that decides what leaves or where
//!   (each recipient list in order, subject, body, the thread ids, the derived-recipients flag)
//!   and the [`PolicyRevision`] of the rules that will judge it. Fields are length-prefixed under
//!   a versioned domain tag, so no two different proposals share an encoding (moving text from
//!   one field or list entry to the next changes the digest).
//! - An [`ApprovalBook`] keeps what it offered in memory, per process: an [`ApprovalId`] is 128
//!   random bits naming one offer bound to a caller, a digest and an expiry. [`ApprovalBook::redeem`]
//!   removes the offer whatever the outcome, so an id is used at most once, and a mismatch spends
//!   it (a caller probing with altered messages gets one try). A client echoes the id verbatim:
//!   it is only a handle, never trusted for what it names.
//! - An [`Approval`] has private fields and is neither `Clone` nor `Copy`: only a redemption
//!   that matched makes one, or [`ApprovalBook::waive`] when `MAILGATE_SEND_APPROVAL=off`.
//!   The send path must consume one to get a permit.
//! - The book holds at most [`MAX_PENDING`] offers; the oldest goes first, so a client that
//!   never answers cannot grow it.
//!
//! Who may call it: the send tool (offers and redemptions) and startup (the book, from the
//! mode). Nothing here performs I/O.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::RngExt;
use sha2::{Digest, Sha256};

use crate::outbound::{OutboundPolicy, Proposal, Thread};

/// `MAILGATE_SEND_APPROVAL`'s default lifetime of an offer: a person reads, then answers.
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(600);
/// Most offers awaiting an answer at once.
pub const MAX_PENDING: usize = 32;
/// Hex characters of an [`ApprovalId`] (128 bits).
const ID_HEX: usize = 32;
/// The digest's domain tag: a new encoding gets a new tag.
const DIGEST_TAG: &[u8] = b"mailgate-approval-v1";

/// Whether a person must approve each send (`MAILGATE_SEND_APPROVAL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalMode {
    /// The default: nothing is sent without a person's approval of that message.
    Required,
    /// Sends need no approval (the behaviour before issue 38).
    Off,
}

impl ApprovalMode {
    /// The variable's value, strictly: absent or blank is [`ApprovalMode::Required`]; otherwise
    /// exactly `required` or `off` (trimmed, any case). Anything else is refused, never guessed.
    pub fn parse(raw: Option<&str>) -> Result<Self, UnknownApprovalMode> {
        let Some(value) = raw.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(Self::Required);
        };
        if value.eq_ignore_ascii_case("required") {
            Ok(Self::Required)
        } else if value.eq_ignore_ascii_case("off") {
            Ok(Self::Off)
        } else {
            Err(UnknownApprovalMode)
        }
    }

    /// The spelling `policy explain` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Required => "required",
            Self::Off => "off",
        }
    }
}

/// `MAILGATE_SEND_APPROVAL` holds neither `required` nor `off` (the value is not repeated: it
/// is the operator's, and the two spellings are all there is to say).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("MAILGATE_SEND_APPROVAL must be `required` or `off`")]
pub struct UnknownApprovalMode;

/// A digest of the rules a message is judged by (the outbound policy's sender, allowlists and
/// cap): an approval given under one revision is void under another.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PolicyRevision([u8; 32]);

impl PolicyRevision {
    /// The revision of `policy`'s frozen rules.
    pub fn of_policy(policy: &OutboundPolicy) -> Self {
        let parts = policy.rule_parts();
        Self::of(&parts.each_ref().map(Vec::as_slice))
    }

    fn of(parts: &[&[u8]]) -> Self {
        let mut hash = Sha256::new();
        hash.update(b"mailgate-policy-revision-v1");
        for part in parts {
            field(&mut hash, part);
        }
        Self(hash.finalize().into())
    }

    /// The first 12 hex characters, for a person to compare (not a secret).
    pub fn short(&self) -> String {
        hex::encode(&self.0[..6])
    }
}

impl fmt::Debug for PolicyRevision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PolicyRevision({})", self.short())
    }
}

/// SHA-256 of one proposal under one policy revision.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct MessageDigest([u8; 32]);

impl MessageDigest {
    /// The digest of `proposal` as `revision` would judge it.
    pub fn of(proposal: &Proposal, revision: &PolicyRevision) -> Self {
        let Proposal {
            to,
            cc,
            bcc,
            subject,
            body,
            thread,
            recipients_from_original,
        } = proposal;
        let mut hash = Sha256::new();
        hash.update(DIGEST_TAG);
        hash.update(revision.0);
        for list in [to, cc, bcc] {
            list_field(&mut hash, list);
        }
        field(&mut hash, subject.as_bytes());
        field(&mut hash, body.as_bytes());
        match thread {
            None => hash.update([0]),
            Some(Thread {
                in_reply_to,
                references,
            }) => {
                hash.update([1]);
                field(&mut hash, in_reply_to.as_bytes());
                list_field(&mut hash, references);
            }
        }
        hash.update([u8::from(*recipients_from_original)]);
        Self(hash.finalize().into())
    }

    /// Lower-case hex, what a person (or the review card) is shown.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Debug for MessageDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MessageDigest({})", &self.hex()[..12])
    }
}

/// One length-prefixed field.
fn field(hash: &mut Sha256, bytes: &[u8]) {
    hash.update(u64::try_from(bytes.len()).unwrap_or(u64::MAX).to_be_bytes());
    hash.update(bytes);
}

/// A count, then each entry as a field.
fn list_field(hash: &mut Sha256, list: &[String]) {
    hash.update(u64::try_from(list.len()).unwrap_or(u64::MAX).to_be_bytes());
    for entry in list {
        field(hash, entry.as_bytes());
    }
}

/// The handle of one offer: 32 lower-case hex characters.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ApprovalId(String);

impl ApprovalId {
    fn random() -> Self {
        let bytes: [u8; ID_HEX / 2] = rand::rng().random();
        Self(hex::encode(bytes))
    }

    /// A client's echo, checked for shape only (what it names is looked up, never trusted).
    pub fn parse(raw: &str) -> Option<Self> {
        (raw.len() == ID_HEX && raw.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApprovalId {
    // A live id redeems a send: keep it out of logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApprovalId(..)")
    }
}

/// What an offer tells the caller to show a person.
#[derive(Debug)]
pub struct Offer {
    pub id: ApprovalId,
    /// How long the person has to answer.
    pub expires_in: Duration,
}

/// Proof that a person approved this digest (or that approval is off). Consumed by the send.
///
/// ```compile_fail,E0599
/// fn twice(a: mailgate_policy::approval::Approval) { let _b = a.clone(); }
/// ```
pub struct Approval {
    digest: Option<MessageDigest>,
    _private: (),
}

impl Approval {
    /// Whether this approval covers `digest`: a person's covers exactly the one they saw; the
    /// waiver of `off` covers any.
    pub fn covers(&self, digest: &MessageDigest) -> bool {
        self.digest.is_none_or(|approved| approved == *digest)
    }

    /// Whether a person gave it (the journal records that, never content).
    pub fn by_a_person(&self) -> bool {
        self.digest.is_some()
    }
}

impl fmt::Debug for Approval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Approval")
            .field("by_a_person", &self.by_a_person())
            .finish_non_exhaustive()
    }
}

/// Why an approval could not be redeemed. Each spends the offer, if there was one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Void {
    #[error("no pending approval has this id: it was used, replaced or never offered")]
    Unknown,
    #[error("the approval expired before it was answered; ask again")]
    Expired,
    #[error("the approval was offered to another caller")]
    OtherCaller,
    #[error(
        "the message differs from the one approved (a recipient, the subject, the body, the \
         thread or the policy changed); ask again"
    )]
    Changed,
}

struct Pending {
    id: ApprovalId,
    caller: String,
    digest: MessageDigest,
    expires: Instant,
}

/// The offers awaiting a person's answer, and the mode that says whether any are needed.
pub struct ApprovalBook {
    mode: ApprovalMode,
    ttl: Duration,
    pending: Mutex<VecDeque<Pending>>,
}

impl ApprovalBook {
    pub fn new(mode: ApprovalMode, ttl: Duration) -> Self {
        Self {
            mode,
            ttl,
            pending: Mutex::new(VecDeque::new()),
        }
    }

    pub fn mode(&self) -> ApprovalMode {
        self.mode
    }

    /// With approval off, the approval every send carries; with it required, none.
    pub fn waive(&self) -> Option<Approval> {
        (self.mode == ApprovalMode::Off).then_some(Approval {
            digest: None,
            _private: (),
        })
    }

    /// Records an offer of `digest` to `caller` (its [`crate::caller::Caller::binding`]).
    pub fn offer(&self, caller: &str, digest: MessageDigest, now: Instant) -> Offer {
        let id = ApprovalId::random();
        let mut pending = self.lock();
        pending.retain(|p| p.expires > now);
        while pending.len() >= MAX_PENDING {
            pending.pop_front();
        }
        pending.push_back(Pending {
            id: id.clone(),
            caller: caller.to_owned(),
            digest,
            expires: now + self.ttl,
        });
        Offer {
            id,
            expires_in: self.ttl,
        }
    }

    /// Redeems the person's acceptance of offer `id` for the message now proposed. The offer
    /// is gone afterwards, whatever the outcome.
    pub fn redeem(
        &self,
        caller: &str,
        id: &ApprovalId,
        digest: &MessageDigest,
        now: Instant,
    ) -> Result<Approval, Void> {
        let offered = {
            let mut pending = self.lock();
            let at = pending
                .iter()
                .position(|p| p.id == *id)
                .ok_or(Void::Unknown)?;
            pending.remove(at).ok_or(Void::Unknown)?
        };
        if offered.expires <= now {
            return Err(Void::Expired);
        }
        if offered.caller != caller {
            return Err(Void::OtherCaller);
        }
        if offered.digest != *digest {
            return Err(Void::Changed);
        }
        Ok(Approval {
            digest: Some(offered.digest),
            _private: (),
        })
    }

    /// Drops an offer the person declined or cancelled.
    pub fn withdraw(&self, id: &ApprovalId) {
        self.lock().retain(|p| p.id != *id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Pending>> {
        // The queue stays consistent whatever panicked while holding it (each step is whole).
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn revision() -> PolicyRevision {
        PolicyRevision::of(&[b"a@example.com", b"example.org"])
    }

    fn proposal() -> Proposal {
        Proposal {
            to: vec!["dana@example.org".into()],
            cc: vec![],
            bcc: vec![],
            subject: "Quarterly numbers".into(),
            body: "See the attached summary.".into(),
            thread: None,
            recipients_from_original: false,
        }
    }

    fn book() -> ApprovalBook {
        ApprovalBook::new(ApprovalMode::Required, DEFAULT_APPROVAL_TTL)
    }

    /// A book requiring approval, the moment of the offer, and the digest of `proposal()`.
    fn offering() -> (ApprovalBook, Instant, MessageDigest) {
        (
            book(),
            Instant::now(),
            MessageDigest::of(&proposal(), &revision()),
        )
    }

    #[test]
    fn the_mode_is_strict_and_required_by_default() {
        assert_eq!(ApprovalMode::parse(None), Ok(ApprovalMode::Required));
        assert_eq!(ApprovalMode::parse(Some("  ")), Ok(ApprovalMode::Required));
        assert_eq!(
            ApprovalMode::parse(Some("Required")),
            Ok(ApprovalMode::Required)
        );
        assert_eq!(ApprovalMode::parse(Some(" off ")), Ok(ApprovalMode::Off));
        for wrong in ["no", "false", "0", "disabled", "of", "required,off"] {
            assert_eq!(
                ApprovalMode::parse(Some(wrong)),
                Err(UnknownApprovalMode),
                "{wrong}"
            );
        }
    }

    #[test]
    fn only_off_waives_and_a_waiver_covers_any_message() {
        assert!(book().waive().is_none());
        let off = ApprovalBook::new(ApprovalMode::Off, DEFAULT_APPROVAL_TTL);
        let waiver = off.waive().expect("off waives");
        assert!(!waiver.by_a_person());
        assert!(waiver.covers(&MessageDigest::of(&proposal(), &revision())));
    }

    #[test]
    fn the_person_approves_exactly_the_message_offered_once() {
        let (book, now, digest) = offering();
        let offer = book.offer("operator", digest, now);
        assert_eq!(ApprovalId::parse(offer.id.as_str()), Some(offer.id.clone()));
        let approval = book
            .redeem("operator", &offer.id, &digest, now)
            .expect("the offered message");
        assert!(approval.by_a_person() && approval.covers(&digest));
        let mut other = proposal();
        other.body.push('!');
        assert!(!approval.covers(&MessageDigest::of(&other, &revision())));
        assert_eq!(
            book.redeem("operator", &offer.id, &digest, now)
                .unwrap_err(),
            Void::Unknown,
            "single use"
        );
    }

    #[test]
    fn a_changed_message_caller_or_late_answer_is_void_and_spends_the_offer() {
        let (book, now, digest) = offering();
        let mut changed = proposal();
        changed.bcc.push("eve@example.org".into());
        let changed = MessageDigest::of(&changed, &revision());
        let cases: [(&str, &MessageDigest, Instant, Void); 3] = [
            ("operator", &changed, now, Void::Changed),
            ("person:dana", &digest, now, Void::OtherCaller),
            (
                "operator",
                &digest,
                now + DEFAULT_APPROVAL_TTL,
                Void::Expired,
            ),
        ];
        for (caller, proposed, at, void) in cases {
            let offer = book.offer("operator", digest, now);
            assert_eq!(
                book.redeem(caller, &offer.id, proposed, at).unwrap_err(),
                void
            );
            assert_eq!(
                book.redeem("operator", &offer.id, &digest, now)
                    .unwrap_err(),
                Void::Unknown,
                "{void:?} spent the offer"
            );
        }
        let forged = ApprovalId::parse(&"0".repeat(ID_HEX)).unwrap();
        assert_eq!(
            book.redeem("operator", &forged, &digest, now).unwrap_err(),
            Void::Unknown
        );
    }

    #[test]
    fn a_withdrawn_offer_and_the_oldest_past_the_cap_are_gone() {
        let (book, now, digest) = offering();
        let declined = book.offer("operator", digest, now);
        book.withdraw(&declined.id);
        assert_eq!(
            book.redeem("operator", &declined.id, &digest, now)
                .unwrap_err(),
            Void::Unknown
        );
        let first = book.offer("operator", digest, now);
        let rest: Vec<Offer> = (0..MAX_PENDING)
            .map(|_| book.offer("operator", digest, now))
            .collect();
        assert_eq!(
            book.redeem("operator", &first.id, &digest, now)
                .unwrap_err(),
            Void::Unknown
        );
        assert!(book.redeem("operator", &rest[0].id, &digest, now).is_ok());
    }

    #[test]
    fn ids_are_refused_unless_32_lower_hex() {
        for bad in [
            "",
            "abc",
            &"A".repeat(ID_HEX),
            &"g".repeat(ID_HEX),
            &"0".repeat(ID_HEX + 1),
        ] {
            assert!(ApprovalId::parse(bad).is_none(), "{bad}");
        }
        assert!(!format!("{:?}", ApprovalId::random()).contains(char::is_numeric));
    }

    #[test]
    fn another_policy_revision_is_another_digest() {
        let other = PolicyRevision::of(&[b"a@example.com", b"example.net"]);
        assert_ne!(
            MessageDigest::of(&proposal(), &revision()),
            MessageDigest::of(&proposal(), &other)
        );
        // Parts are length-prefixed: ["ab", "c"] is not ["a", "bc"].
        assert_ne!(
            PolicyRevision::of(&[b"ab", b"c"]),
            PolicyRevision::of(&[b"a", b"bc"])
        );
    }

    fn text() -> impl Strategy<Value = String> {
        "[a-c@. ]{0,4}"
    }

    fn proposals() -> impl Strategy<Value = Proposal> {
        let list = || prop::collection::vec(text(), 0..3);
        (
            (list(), list(), list()),
            text(),
            text(),
            prop::option::of((text(), list())),
            any::<bool>(),
        )
            .prop_map(|((to, cc, bcc), subject, body, thread, derived)| Proposal {
                to,
                cc,
                bcc,
                subject,
                body,
                thread: thread.map(|(in_reply_to, references)| Thread {
                    in_reply_to,
                    references,
                }),
                recipients_from_original: derived,
            })
    }

    /// Everything the digest reads, as one comparable value.
    fn parts(p: &Proposal) -> impl PartialEq + fmt::Debug {
        (
            (p.to.clone(), p.cc.clone(), p.bcc.clone()),
            (p.subject.clone(), p.body.clone()),
            p.thread
                .as_ref()
                .map(|t| (t.in_reply_to.clone(), t.references.clone())),
            p.recipients_from_original,
        )
    }

    #[test]
    fn text_moved_between_fields_or_entries_is_another_message() {
        let base = proposal();
        let mut moved = vec![base.clone(); 4];
        moved[0].subject = "Quarterly number".into();
        moved[0].body = "sSee the attached summary.".into();
        moved[1].to = vec!["dana@example".into(), ".org".into()];
        moved[2].to = vec![];
        moved[2].cc = vec!["dana@example.org".into()];
        moved[3].thread = Some(Thread {
            in_reply_to: String::new(),
            references: vec![],
        });
        let digest = MessageDigest::of(&base, &revision());
        for other in &moved {
            assert_ne!(digest, MessageDigest::of(other, &revision()), "{other:?}");
        }
    }

    proptest! {
        /// Two proposals share a digest exactly when they are the same message: no shifting of
        /// text between fields, lists or entries collides.
        #[test]
        fn digests_differ_exactly_when_messages_do(a in proposals(), b in proposals()) {
            let same = parts(&a) == parts(&b);
            prop_assert_eq!(
                MessageDigest::of(&a, &revision()) == MessageDigest::of(&b, &revision()),
                same
            );
        }
    }
}
