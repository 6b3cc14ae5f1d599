//! The outbound chokepoint: the one place that decides whether a message may leave the gateway,
//! and the only constructor of a [`SendPermit`] (security.md §2, style rules 4 and 5).
//!
//! Invariants:
//! - [`OutboundPolicy`] is built once at startup from the resolved [`SendSettings`] and its rules
//!   never change afterwards (there is no setter); only the send-cap counter moves.
//! - [`OutboundPolicy::decide`] returns `#[must_use]` [`Decision::Allow`] with a permit only when
//!   every rule passes: the pinned sender (`OUTLOOK_SEND_FROM`) is in the allowed senders; every
//!   to/cc/bcc recipient parses as a bare address ([`EmailAddress::parse`], no pattern matching)
//!   and its domain — the exact part after the last `@`, lower-cased — is listed (a subdomain
//!   does not inherit, a look-alike suffix never matches); no header value (subject, thread ids)
//!   holds a control character (`compose::check_header_value`: CR, LF, NUL, but also VT, FF,
//!   ESC, BEL, HT, DEL, C1 and the Unicode line separators); no recipient is derived from the message being answered; and the
//!   per-process cap (messages per hour, sliding window on a monotonic clock) has room. Every
//!   other outcome is a [`DenyReason`] with a stable code whose text names the rule, never an
//!   address or a domain.
//! - A [`SendPermit`] holds the rendered message (from `mime::compose::render`, without a `Bcc:`
//!   header) and its envelope (the sender and every recipient, bcc included). It has a private
//!   field, is neither `Clone` nor `Copy`, and every transport's send method takes it by value
//!   and sends what it holds, not arguments of its own. A permit is issued only for a real send:
//!   issuing it takes a slot of the cap, whether or not the transport then succeeds (an attempt
//!   that failed may still have delivered). A dry run ([`OutboundPolicy::preview`]) runs the same
//!   rules but yields no permit and takes no slot.
//!
//! Who may call it: startup builds the policy; the send tool (`tools/send.rs`) proposes messages
//! and hands the permit to a transport in `backends`. Nothing here performs I/O.

use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::RngExt;

use crate::address::EmailAddress;
use crate::compose::{self, ComposeError, HeaderField, Outgoing};
use crate::gates::SendSettings;

/// Most envelope recipients one message may have (to + cc + bcc, before deduplication): a larger
/// list is a bulk mail, not an assistant's message.
pub(crate) const MAX_RECIPIENTS: usize = 100;
/// The sliding window of the send cap.
const CAP_WINDOW: Duration = Duration::from_secs(3600);
/// Longest Message-ID used for threading (RFC 5322 puts no limit; real ones are far shorter).
const MAX_MESSAGE_ID_LEN: usize = 250;
/// Most `References` ids carried over from the message answered (the newest are kept).
const MAX_REFERENCES: usize = 20;

/// What the send tool asks to send. Sender-independent: there is no `from` here, the sender is
/// the policy's pinned `OUTLOOK_SEND_FROM`.
#[derive(Clone, Debug, Default)]
pub struct Proposal {
    /// Recipient strings exactly as given; each is parsed here.
    pub to: Vec<String>,
    pub cc: Vec<String>,
    pub bcc: Vec<String>,
    pub subject: String,
    pub body: String,
    /// Threading headers taken from a message in the sending mailbox (untrusted content).
    pub thread: Option<Thread>,
    /// Take recipients from the message answered (a reply-all). No tool input asks for this
    /// today; the rule refuses it outright because those addresses come from untrusted content.
    pub recipients_from_original: bool,
}

/// Threading only: the ids the new message refers to. Never a source of recipients.
#[derive(Clone, Debug, Default)]
pub struct Thread {
    /// The Message-ID of the message answered.
    pub in_reply_to: String,
    /// Its ancestors, oldest first (the new message's `References` ends with `in_reply_to`).
    pub references: Vec<String>,
}

/// The outcome of [`OutboundPolicy::decide`]. There is no boolean shortcut: a permit can only be
/// obtained by matching `Allow`.
#[must_use]
#[derive(Debug)]
pub enum Decision {
    Allow(SendPermit),
    Deny(DenyReason),
}

/// Why a message may not leave. Codes are stable; messages name the rule and, at most, a count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DenyReason {
    #[error("the configured sender is not in the allowed senders")]
    SenderNotAllowed,
    #[error(
        "{refused} recipient(s) are outside the allowed recipient domains; this is a policy \
         refusal, do not retry"
    )]
    RecipientDomainNotAllowed { refused: usize },
    #[error("{count} recipient(s) are not valid bare email addresses (local@domain)")]
    AddressInvalid { count: usize },
    #[error("the message has no recipients")]
    NoRecipients,
    #[error("the message has {count} recipients; at most {max} are allowed")]
    TooManyRecipients { count: usize, max: usize },
    #[error(
        "the {field} contains a control character (line break, NUL, tab, escape or another \
         control); header values are refused, not escaped"
    )]
    HeaderInjection { field: HeaderField },
    #[error(
        "recipients derived from the original message are refused; name every recipient \
         explicitly"
    )]
    ReplyRecipientsDerived,
    #[error("the Message-ID of the message answered cannot be used for threading")]
    ThreadIdInvalid,
    #[error(
        "the per-process send cap of {max_per_hour} messages per hour is reached; retry in \
         {secs} s",
        secs = whole_secs_up(*.retry_after)
    )]
    RateLimited {
        max_per_hour: u32,
        /// Until the oldest send counted leaves the hour window (a slot is free then, unless
        /// another send takes it first).
        retry_after: Duration,
    },
    #[error("the message could not be built")]
    MessageInvalid,
}

impl DenyReason {
    /// The stable code, shown to the caller and recorded in the journal.
    pub fn code(self) -> &'static str {
        match self {
            DenyReason::SenderNotAllowed => "SENDER_NOT_ALLOWED",
            DenyReason::RecipientDomainNotAllowed { .. } => "RECIPIENT_DOMAIN_NOT_ALLOWED",
            DenyReason::AddressInvalid { .. } => "ADDRESS_INVALID",
            DenyReason::NoRecipients => "NO_RECIPIENTS",
            DenyReason::TooManyRecipients { .. } => "TOO_MANY_RECIPIENTS",
            DenyReason::HeaderInjection { .. } => "HEADER_INJECTION",
            DenyReason::ReplyRecipientsDerived => "REPLY_RECIPIENTS_DERIVED",
            DenyReason::ThreadIdInvalid => "THREAD_ID_INVALID",
            DenyReason::RateLimited { .. } => "RATE_LIMITED",
            DenyReason::MessageInvalid => "MESSAGE_INVALID",
        }
    }

    /// When a retry can succeed, in whole seconds (rounded up, at least 1): only the cap has
    /// one, every other rule refuses the same message again. Rounded up because the window is
    /// exact: a retry a fraction of a second early would be refused once more.
    pub fn retry_after_secs(self) -> Option<u64> {
        match self {
            DenyReason::RateLimited { retry_after, .. } => Some(whole_secs_up(retry_after)),
            _ => None,
        }
    }
}

/// A wait in whole seconds, rounded up, at least 1 (a "retry in 0 s" would invite a refusal).
fn whole_secs_up(wait: Duration) -> u64 {
    let secs = wait.as_secs();
    let secs = if wait.subsec_nanos() > 0 {
        secs.saturating_add(1)
    } else {
        secs
    };
    secs.max(1)
}

/// The rendered message and its envelope, as approved. Private fields: only this module builds
/// one, and only inside a [`SendPermit`].
pub(crate) struct ApprovedMessage {
    from: EmailAddress,
    /// Every envelope recipient (to, cc and bcc), deduplicated, in the order given.
    recipients: Vec<EmailAddress>,
    /// The RFC 5322 message as it goes on the wire (no `Bcc:` header).
    bytes: Vec<u8>,
    /// The same message with its `Bcc:` header, for a transport that takes every recipient
    /// from the headers (Graph's MIME `sendMail`).
    header_addressed: Vec<u8>,
    /// The `Message-ID` header value, angle brackets included.
    message_id: String,
}

/// Proof that `OutboundPolicy::decide` approved one message. Built only in this module, not
/// `Clone`, consumed by every send path (style rule 4). It is `pub` because the transports of
/// the `mailgate` crate take it by value; the doctests below are such another crate and prove
/// that it can name the type but neither build nor clone one — the failures are about the
/// private fields and the missing trait, not about an unreachable path (the last example
/// compiles):
///
/// ```compile_fail,E0451
/// fn forge() -> mailgate_policy::outbound::SendPermit {
///     mailgate_policy::outbound::SendPermit { message: unreachable!(), _private: () }
/// }
/// ```
///
/// ```compile_fail,E0277
/// fn duplicate<T: Clone>(permit: &T) -> T {
///     permit.clone()
/// }
/// fn twice(permit: mailgate_policy::outbound::SendPermit) {
///     let _second = duplicate(&permit);
/// }
/// ```
///
/// ```compile_fail,E0277
/// fn copyable<T: Copy>() {}
/// copyable::<mailgate_policy::outbound::SendPermit>();
/// ```
///
/// ```
/// // The type is nameable from outside; it just cannot be made or multiplied there.
/// fn consume(_permit: mailgate_policy::outbound::SendPermit) {}
/// let _ = consume;
/// ```
pub struct SendPermit {
    message: ApprovedMessage,
    _private: (),
}

impl SendPermit {
    /// The envelope sender (`MAIL FROM`): always the pinned `OUTLOOK_SEND_FROM`.
    pub fn envelope_from(&self) -> &EmailAddress {
        &self.message.from
    }

    /// The envelope recipients (`RCPT TO`), bcc included.
    pub fn envelope_recipients(&self) -> &[EmailAddress] {
        &self.message.recipients
    }

    /// The message bytes to transmit.
    pub fn bytes(&self) -> &[u8] {
        &self.message.bytes
    }

    /// The message with a `Bcc:` header naming the blind recipients, for a transport that takes
    /// every recipient from the headers instead of an envelope (Graph's MIME `sendMail`). Never
    /// for SMTP `DATA`: there it would show the blind recipients to everyone.
    pub fn header_addressed_bytes(&self) -> &[u8] {
        &self.message.header_addressed
    }

    /// Consumes the permit once a transport has delivered it; what remains can be filed (the
    /// Sent copy) and reported, but never sent again.
    pub fn into_sent(self) -> SentMessage {
        let ApprovedMessage {
            recipients,
            bytes,
            message_id,
            ..
        } = self.message;
        SentMessage {
            message_id,
            recipients: recipients.len(),
            bytes,
        }
    }
}

impl fmt::Debug for SendPermit {
    // Counts only: a permit's addresses and content must not reach a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendPermit")
            .field("recipients", &self.message.recipients.len())
            .field("size_bytes", &self.message.bytes.len())
            .finish_non_exhaustive()
    }
}

/// A delivered message: what the receipt and the Sent copy need. No transport accepts it.
pub struct SentMessage {
    pub message_id: String,
    pub recipients: usize,
    pub bytes: Vec<u8>,
}

/// What a dry run reports when the policy would allow the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preview {
    /// Envelope recipients after deduplication.
    pub recipients: usize,
    /// Size of the rendered message.
    pub size_bytes: u64,
}

/// The frozen outbound rules plus the per-process send cap.
pub struct OutboundPolicy {
    from: EmailAddress,
    allowed_senders: Vec<EmailAddress>,
    /// Lower-case DNS names (validated [`crate::address::Domain`]s).
    recipient_domains: HashSet<String>,
    cap: SendCap,
}

impl OutboundPolicy {
    /// Freezes the resolved send settings into the policy.
    pub fn new(settings: &SendSettings) -> Self {
        Self::from_parts(
            settings.from.clone(),
            settings.allowed_senders.clone(),
            settings
                .recipient_domains
                .iter()
                .map(|d| d.as_str().to_owned()),
            settings.max_per_hour,
        )
    }

    fn from_parts(
        from: EmailAddress,
        allowed_senders: Vec<EmailAddress>,
        recipient_domains: impl IntoIterator<Item = String>,
        max_per_hour: u32,
    ) -> Self {
        Self {
            from,
            allowed_senders,
            recipient_domains: recipient_domains.into_iter().collect(),
            cap: SendCap::new(max_per_hour),
        }
    }

    /// These rules as bytes, for the revision an approval is bound to
    /// (`approval::PolicyRevision::of_policy`): the sender, the allowed senders, the recipient
    /// domains (sorted) and the cap. Two policies that judge alike give the same parts.
    pub fn rule_parts(&self) -> [Vec<u8>; 4] {
        let mut domains: Vec<&str> = self.recipient_domains.iter().map(String::as_str).collect();
        domains.sort_unstable();
        let senders: Vec<&str> = self
            .allowed_senders
            .iter()
            .map(EmailAddress::as_str)
            .collect();
        [
            self.from.as_str().as_bytes().to_vec(),
            senders.join("\n").into_bytes(),
            domains.join("\n").into_bytes(),
            self.cap.max_per_hour.to_be_bytes().to_vec(),
        ]
    }

    /// Decides a real send. An `Allow` takes a slot of the send cap.
    pub fn decide(&self, proposal: Proposal) -> Decision {
        self.decide_at(proposal, Instant::now())
    }

    fn decide_at(&self, proposal: Proposal, now: Instant) -> Decision {
        let message = match self.approve(proposal) {
            Ok(message) => message,
            Err(reason) => return Decision::Deny(reason),
        };
        if let Err(retry_after) = self.cap.try_reserve(now) {
            return Decision::Deny(DenyReason::RateLimited {
                max_per_hour: self.cap.max_per_hour,
                retry_after,
            });
        }
        Decision::Allow(SendPermit {
            message,
            _private: (),
        })
    }

    /// The verdict a real send would get now, without a permit and without taking a slot.
    pub fn preview(&self, proposal: Proposal) -> Result<Preview, DenyReason> {
        let message = self.approve(proposal)?;
        if let Err(retry_after) = self.cap.has_room(Instant::now()) {
            return Err(DenyReason::RateLimited {
                max_per_hour: self.cap.max_per_hour,
                retry_after,
            });
        }
        Ok(Preview {
            recipients: message.recipients.len(),
            size_bytes: u64::try_from(message.bytes.len()).unwrap_or(u64::MAX),
        })
    }

    /// Every rule but the cap, in a fixed order; renders the message when all pass.
    fn approve(&self, proposal: Proposal) -> Result<ApprovedMessage, DenyReason> {
        let Proposal {
            to,
            cc,
            bcc,
            subject,
            body,
            thread,
            recipients_from_original,
        } = proposal;

        // 1. Header values first, so a control character is always reported as what it is.
        // The subject is the caller's own text (a reply's subject is never taken from the
        // message answered); the thread ids come from that message, and a send that cannot
        // thread cleanly is refused rather than sent with the ids altered.
        let thread_ids = thread.iter().flat_map(|t| {
            std::iter::once((HeaderField::InReplyTo, &t.in_reply_to))
                .chain(t.references.iter().map(|r| (HeaderField::References, r)))
        });
        for (field, value) in std::iter::once((HeaderField::Subject, &subject)).chain(thread_ids) {
            compose::check_header_value(field, value)
                .map_err(|_| DenyReason::HeaderInjection { field })?;
        }
        // 2. Recipients from untrusted content are never taken, whatever the allowlist.
        if recipients_from_original {
            return Err(DenyReason::ReplyRecipientsDerived);
        }
        // 3. The sender is pinned; it must still be covered by the sender allowlist.
        if !self.allowed_senders.contains(&self.from) {
            return Err(DenyReason::SenderNotAllowed);
        }
        // 4. Recipient count, parse, domain.
        let count = to.len() + cc.len() + bcc.len();
        if count == 0 {
            return Err(DenyReason::NoRecipients);
        }
        if count > MAX_RECIPIENTS {
            return Err(DenyReason::TooManyRecipients {
                count,
                max: MAX_RECIPIENTS,
            });
        }
        let parse = |list: &[String]| -> (Vec<EmailAddress>, usize) {
            let mut invalid = 0;
            let parsed = list
                .iter()
                .filter_map(|raw| EmailAddress::parse(raw).map_err(|_| invalid += 1).ok())
                .collect();
            (parsed, invalid)
        };
        let (to, bad_to) = parse(&to);
        let (cc, bad_cc) = parse(&cc);
        let (bcc, bad_bcc) = parse(&bcc);
        let invalid = bad_to + bad_cc + bad_bcc;
        if invalid > 0 {
            return Err(DenyReason::AddressInvalid { count: invalid });
        }
        let refused = to
            .iter()
            .chain(&cc)
            .chain(&bcc)
            .filter(|address| !self.recipient_domains.contains(address.domain()))
            .count();
        if refused > 0 {
            return Err(DenyReason::RecipientDomainNotAllowed { refused });
        }
        // 5. Threading ids must be well-formed msg-ids.
        let (in_reply_to, references) = match thread {
            None => (None, Vec::new()),
            Some(thread) => {
                let parent =
                    normalize_message_id(&thread.in_reply_to).ok_or(DenyReason::ThreadIdInvalid)?;
                let mut references = thread
                    .references
                    .iter()
                    .map(|id| normalize_message_id(id).ok_or(DenyReason::ThreadIdInvalid))
                    .collect::<Result<Vec<_>, _>>()?;
                references.retain(|id| *id != parent);
                references.push(parent.clone());
                let skip = references.len().saturating_sub(MAX_REFERENCES);
                (Some(parent), references.split_off(skip))
            }
        };

        let mut recipients: Vec<EmailAddress> = Vec::with_capacity(count);
        for address in to.iter().chain(&cc).chain(&bcc) {
            if !recipients.contains(address) {
                recipients.push(address.clone());
            }
        }
        // One `References` value, ids separated by spaces: lettre's builder sets (replaces) the
        // header on each call, so a list of several would keep only the last id.
        let references = if references.is_empty() {
            Vec::new()
        } else {
            vec![references.join(" ")]
        };
        let outgoing = Outgoing {
            from: self.from.clone(),
            to,
            cc,
            bcc,
            subject,
            body,
            in_reply_to,
            references,
            attachments: Vec::new(),
        };
        // On the wire the blind recipients are in the envelope only, never in a header; the
        // header-addressed copy is for transports without an envelope.
        let (wire, addressed) =
            compose::render_for_sending(&outgoing).map_err(|error| match error {
                ComposeError::HeaderInjection { field } => DenyReason::HeaderInjection { field },
                _ => DenyReason::MessageInvalid,
            })?;
        let (header_addressed, message_id) = with_message_id(addressed, &self.from, None);
        let (bytes, _) = with_message_id(wire, &self.from, Some(&message_id));
        Ok(ApprovedMessage {
            from: self.from.clone(),
            recipients,
            bytes,
            header_addressed,
            message_id,
        })
    }
}

/// A Message-ID as `<id-left@id-right>`: surrounding angle brackets optional on input, then
/// 3–250 printable ASCII characters without whitespace or angle brackets, with an `@` that is
/// neither first nor last. Anything else is not used for threading.
fn normalize_message_id(raw: &str) -> Option<String> {
    let inner = raw.strip_prefix('<').unwrap_or(raw);
    let inner = inner.strip_suffix('>').unwrap_or(inner);
    let shaped = (3..=MAX_MESSAGE_ID_LEN).contains(&inner.len())
        && inner
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'<' && b != b'>')
        && inner
            .rsplit_once('@')
            .is_some_and(|(left, right)| !left.is_empty() && !right.is_empty());
    shaped.then(|| format!("<{inner}>"))
}

/// Gives the rendered message a `Message-ID` (the receipt, the Sent copy and later replies need
/// one). `compose::render` sets none and lettre adds none, so the header is prepended here —
/// one line whose value is generated from random bytes and the validated sender domain, with no
/// caller text in it (or `given`, the id already chosen for the other render of the same
/// message). Should the composer start setting one, that one is kept instead.
fn with_message_id(
    rendered: Vec<u8>,
    from: &EmailAddress,
    given: Option<&str>,
) -> (Vec<u8>, String) {
    if let Some(existing) = header_value(&rendered, "message-id") {
        return (rendered, existing);
    }
    let id = given.map_or_else(
        || {
            let random: [u8; 16] = rand::rng().random();
            format!("<{}.mailgate@{}>", hex::encode(random), from.domain())
        },
        str::to_owned,
    );
    let mut bytes = format!("Message-ID: {id}\r\n").into_bytes();
    bytes.extend_from_slice(&rendered);
    (bytes, id)
}

/// The unfolded-first-line value of header `name` (lower-case) in the header section.
fn header_value(raw: &[u8], name: &str) -> Option<String> {
    for line in raw.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        let text = String::from_utf8_lossy(line);
        if let Some((key, value)) = text.split_once(':')
            && key.eq_ignore_ascii_case(name)
        {
            return Some(value.trim().to_owned());
        }
    }
    None
}

/// Messages per hour on a sliding window of [`Instant`]s. A poisoned lock fails closed.
///
/// This is also issue 12's per-account SMTP limit (one sending account per process). A sliding
/// window is stricter than the token bucket the IMAP side uses (`backends::rate`): a bucket
/// refills continuously, so after a full burst it grants a send every `1/max_per_hour` of an
/// hour, while this window grants nothing until the oldest send is an hour old — never more
/// than `max_per_hour` sends in any hour, where a bucket allows up to twice that across two
/// adjacent windows.
struct SendCap {
    max_per_hour: u32,
    issued: Mutex<VecDeque<Instant>>,
}

impl SendCap {
    fn new(max_per_hour: u32) -> Self {
        Self {
            max_per_hour,
            issued: Mutex::new(VecDeque::new()),
        }
    }

    fn prune(issued: &mut VecDeque<Instant>, now: Instant) {
        while issued
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= CAP_WINDOW)
        {
            issued.pop_front();
        }
    }

    fn limit(&self) -> usize {
        usize::try_from(self.max_per_hour).unwrap_or(usize::MAX)
    }

    /// Takes a slot, or says how long until one is free.
    fn try_reserve(&self, now: Instant) -> Result<(), Duration> {
        let Ok(mut issued) = self.issued.lock() else {
            // A poisoned counter never recovers: refuse, with a whole window as the hint.
            return Err(CAP_WINDOW);
        };
        Self::prune(&mut issued, now);
        self.room(&issued, now)?;
        issued.push_back(now);
        Ok(())
    }

    /// [`Self::try_reserve`] without taking the slot.
    fn has_room(&self, now: Instant) -> Result<(), Duration> {
        let Ok(mut issued) = self.issued.lock() else {
            return Err(CAP_WINDOW);
        };
        Self::prune(&mut issued, now);
        self.room(&issued, now)
    }

    /// On a pruned window: `Ok` when a slot is free, else the wait until the send whose leaving
    /// frees one (the oldest, as the window never holds more than the limit) is an hour old.
    fn room(&self, issued: &VecDeque<Instant>, now: Instant) -> Result<(), Duration> {
        let limit = self.limit();
        if issued.len() < limit {
            return Ok(());
        }
        let frees_a_slot = issued.len() - limit;
        Err(issued.get(frees_a_slot).map_or(CAP_WINDOW, |sent| {
            (*sent + CAP_WINDOW).saturating_duration_since(now)
        }))
    }
}

/// Fuzz entry point (`fuzzing::outbound_decide`). The input is read as lossy UTF-8 after a
/// flags byte (bit 0: the sender is listed; bit 1: a thread is given; bit 2: derived recipients
/// are asked for) and split on U+001F into: the domain allowlist (comma list), to, cc, bcc
/// (comma lists), the subject, the thread's in-reply-to id. Oracle, computed independently of
/// `decide`: no `Allow` for a recipient whose domain (after the last `@`, lower-cased) is not
/// listed or whose local part holds routing syntax (`! % @ = / | & " \ : ,`), for a header value
/// with a control character (C0, DEL, C1), for an unlisted sender or for derived recipients;
/// an `Allow` carries exactly the listed recipients and no `Bcc:` header.
// Only in fuzz and test builds: an oracle is no part of what ships.
#[cfg(any(test, fuzzing))]
pub(crate) fn fuzz_outbound(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let mut fields = text.split('\u{1f}');
    let mut next = || fields.next().unwrap_or("");
    let domains_field = next().to_owned();
    let list = |field: &str| -> Vec<String> {
        if field.is_empty() {
            Vec::new()
        } else {
            field.split(',').map(str::to_owned).collect()
        }
    };
    let (to, cc, bcc) = (list(next()), list(next()), list(next()));
    let subject = next().to_owned();
    let in_reply_to = next().to_owned();

    let domains: Vec<String> = domains_field
        .split(',')
        .filter_map(|d| crate::address::Domain::parse(d.trim()).ok())
        .map(|d| d.as_str().to_owned())
        .collect();
    let from = EmailAddress::parse("sender@example.com").expect("invariant: a literal address");
    let senders = if flags & 1 != 0 {
        vec![from.clone()]
    } else {
        vec![EmailAddress::parse("other@example.com").expect("invariant: a literal address")]
    };
    let policy = OutboundPolicy::from_parts(from, senders, domains.clone(), MAX_SEND_CAP);
    let thread = (flags & 2 != 0).then(|| Thread {
        in_reply_to: in_reply_to.clone(),
        references: Vec::new(),
    });
    let proposal = Proposal {
        to: to.clone(),
        cc: cc.clone(),
        bcc: bcc.clone(),
        subject: subject.clone(),
        body: "fuzz".to_owned(),
        thread,
        recipients_from_original: flags & 4 != 0,
    };

    // Restated, not `compose::is_forbidden_in_header`: C0, DEL and C1 controls.
    let injected = |v: &str| {
        v.chars()
            .any(|c| c < ' ' || ('\u{7f}'..='\u{9f}').contains(&c))
    };
    let all: Vec<&String> = to.iter().chain(&cc).chain(&bcc).collect();
    match policy.decide(proposal) {
        Decision::Allow(permit) => {
            assert!(flags & 1 != 0, "oracle: allowed with an unlisted sender");
            assert!(flags & 4 == 0, "oracle: allowed with derived recipients");
            assert!(
                !injected(&subject),
                "oracle: allowed a subject with a control character"
            );
            assert!(
                flags & 2 == 0 || !injected(&in_reply_to),
                "oracle: allowed a thread id with a control character"
            );
            for raw in &all {
                let (local, domain) = raw
                    .rsplit_once('@')
                    .map(|(l, d)| (l, d.to_ascii_lowercase()))
                    .unwrap_or_default();
                assert!(
                    domains.contains(&domain),
                    "oracle: allowed a recipient of an unlisted domain"
                );
                // Restated, not `address::is_local_part_byte`: the routing syntax the rule is for.
                assert!(
                    !local.contains(['!', '%', '@', '=', '/', '|', '&', '"', '\\', ':', ',']),
                    "oracle: allowed a recipient whose local part has routing syntax"
                );
            }
            for address in permit.envelope_recipients() {
                assert!(
                    all.iter()
                        .any(|raw| raw.to_ascii_lowercase() == address.as_str()),
                    "oracle: an envelope recipient that was not proposed"
                );
            }
            assert!(
                header_value(permit.bytes(), "bcc").is_none(),
                "oracle: a Bcc header on the wire"
            );
        }
        Decision::Deny(reason) => {
            if injected(&subject) || (flags & 2 != 0 && injected(&in_reply_to)) {
                assert!(
                    matches!(reason, DenyReason::HeaderInjection { .. }),
                    "oracle: header injection reported as such"
                );
            }
        }
    }
}

/// The cap used by the fuzz target and the property tests, so the cap never decides there.
#[cfg(any(test, fuzzing, feature = "test-support"))]
const MAX_SEND_CAP: u32 = crate::gates::MAX_SEND_MAX_PER_HOUR;

/// A permit for the transports' unit tests, issued through [`OutboundPolicy::decide`] by a
/// policy that lists the three example domains (the rules run as usual: this is no bypass, and
/// it exists in test builds only: the `test-support` feature, which only the main crate's
/// dev-dependency turns on).
#[cfg(any(test, feature = "test-support"))]
pub fn test_permit(to: &[&str]) -> SendPermit {
    test_permit_with_bcc(to, &[])
}

/// [`test_permit`] with blind recipients too.
#[cfg(any(test, feature = "test-support"))]
pub fn test_permit_with_bcc(to: &[&str], bcc: &[&str]) -> SendPermit {
    let from = EmailAddress::parse("finance@example.com").expect("invariant: a literal address");
    let policy = OutboundPolicy::from_parts(
        from.clone(),
        vec![from],
        ["example.com", "example.org", "example.net"].map(str::to_owned),
        MAX_SEND_CAP,
    );
    let proposal = Proposal {
        to: to.iter().map(|s| (*s).to_owned()).collect(),
        bcc: bcc.iter().map(|s| (*s).to_owned()).collect(),
        subject: "Test message".into(),
        body: "Hello from the tests.\n".into(),
        ..Proposal::default()
    };
    match policy.decide(proposal) {
        Decision::Allow(permit) => permit,
        Decision::Deny(reason) => panic!("test_permit: the policy refused: {reason:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn addr(s: &str) -> EmailAddress {
        EmailAddress::parse(s).unwrap()
    }

    fn policy(domains: &[&str]) -> OutboundPolicy {
        OutboundPolicy::from_parts(
            addr("finance@example.com"),
            vec![addr("finance@example.com")],
            domains.iter().map(|d| (*d).to_owned()),
            MAX_SEND_CAP,
        )
    }

    fn proposal(to: &[&str]) -> Proposal {
        Proposal {
            to: to.iter().map(|s| (*s).to_owned()).collect(),
            subject: "Quarterly figures".into(),
            body: "Hello,\nplease find the figures below.\n".into(),
            ..Proposal::default()
        }
    }

    #[test]
    fn the_rule_parts_change_with_every_rule_and_not_with_their_order() {
        let base = policy(&["example.org", "example.net"]).rule_parts();
        assert_eq!(base, policy(&["example.net", "example.org"]).rule_parts());
        let sender = OutboundPolicy::from_parts(
            addr("billing@example.com"),
            vec![addr("billing@example.com")],
            ["example.org".to_owned(), "example.net".to_owned()],
            MAX_SEND_CAP,
        );
        let cap = OutboundPolicy::from_parts(
            addr("finance@example.com"),
            vec![addr("finance@example.com")],
            ["example.org".to_owned(), "example.net".to_owned()],
            MAX_SEND_CAP - 1,
        );
        for other in [policy(&["example.org"]), sender, cap] {
            assert_ne!(base, other.rule_parts());
        }
    }

    fn deny(decision: Decision) -> DenyReason {
        match decision {
            Decision::Deny(reason) => reason,
            Decision::Allow(permit) => panic!("expected a denial, got {permit:?}"),
        }
    }

    fn allow(decision: Decision) -> SendPermit {
        match decision {
            Decision::Allow(permit) => permit,
            Decision::Deny(reason) => panic!("expected a permit, got {reason:?}"),
        }
    }

    #[test]
    fn a_listed_recipient_gets_a_permit_holding_the_rendered_message() {
        let mut p = proposal(&["Ana.Lima@Example.com"]);
        p.cc = vec!["ana.lima@example.com".into()];
        p.bcc = vec!["records@example.com".into()];
        let permit = allow(policy(&["example.com"]).decide(p));
        assert_eq!(permit.envelope_from().as_str(), "finance@example.com");
        let rcpt: Vec<&str> = permit
            .envelope_recipients()
            .iter()
            .map(EmailAddress::as_str)
            .collect();
        assert_eq!(rcpt, ["ana.lima@example.com", "records@example.com"]);
        let text = String::from_utf8_lossy(permit.bytes()).into_owned();
        assert!(text.contains("Subject: Quarterly figures"), "{text}");
        assert!(!text.contains("records@example.com"), "no Bcc on the wire");
        let id = header_value(permit.bytes(), "message-id").expect("a Message-ID header");
        assert!(
            id.starts_with('<') && id.ends_with(".mailgate@example.com>"),
            "{id}"
        );
        let parsed = crate::read_back::parse(permit.bytes());
        assert_eq!(parsed.subject.as_deref(), Some("Quarterly figures"));
        let sent = permit.into_sent();
        assert_eq!((sent.recipients, sent.message_id), (2, id));
    }

    #[test]
    fn domains_match_exactly_after_the_last_at() {
        let p = policy(&["example.com"]);
        for outside in [
            "a@evil.example.com",
            "a@notexample.com",
            "a@example.com.evil.example.net",
            "a@example.co",
            "collector@evil.example.net",
        ] {
            assert_eq!(
                deny(p.decide(proposal(&["ana.lima@example.com", outside]))),
                DenyReason::RecipientDomainNotAllowed { refused: 1 },
                "{outside}"
            );
        }
        // A quoted local part with an '@' inside is not a bare address: refused by the parser.
        assert_eq!(
            deny(p.decide(proposal(&["\"a@example.com\"@evil.example.net"]))),
            DenyReason::AddressInvalid { count: 1 }
        );
        for bad in [
            "Ana <ana@example.com>",
            "ana@example.com\r\nBcc: x@example.com",
            "",
        ] {
            assert_eq!(
                deny(p.decide(proposal(&[bad]))),
                DenyReason::AddressInvalid { count: 1 },
                "{bad:?}"
            );
        }
        // cc and bcc are checked like to.
        let mut hidden = proposal(&["ana.lima@example.com"]);
        hidden.bcc = vec!["x@evil.example.net".into(), "y@evil.example.net".into()];
        hidden.cc = vec!["z@example.org".into()];
        assert_eq!(
            deny(p.decide(hidden)),
            DenyReason::RecipientDomainNotAllowed { refused: 3 }
        );
    }

    #[test]
    fn refusal_messages_carry_counts_not_addresses() {
        let reason = deny(policy(&["example.com"]).decide(proposal(&[
            "collector@evil.example.net",
            "other@evil.example.net",
        ])));
        assert_eq!(reason.code(), "RECIPIENT_DOMAIN_NOT_ALLOWED");
        let message = reason.to_string();
        assert!(
            message.contains('2') && message.contains("do not retry"),
            "{message}"
        );
        assert!(
            !message.contains("evil") && !message.contains('@'),
            "{message}"
        );
    }

    #[test]
    fn every_rule_has_its_code() {
        let p = policy(&["example.com"]);
        let mut derived = proposal(&["ana.lima@example.com"]);
        derived.recipients_from_original = true;
        assert_eq!(deny(p.decide(derived)), DenyReason::ReplyRecipientsDerived);
        assert_eq!(deny(p.decide(proposal(&[]))), DenyReason::NoRecipients);
        let many: Vec<String> = (0..=MAX_RECIPIENTS)
            .map(|i| format!("u{i}@example.com"))
            .collect();
        let mut crowd = proposal(&[]);
        crowd.to = many;
        assert_eq!(
            deny(p.decide(crowd)),
            DenyReason::TooManyRecipients {
                count: MAX_RECIPIENTS + 1,
                max: MAX_RECIPIENTS
            }
        );
        let unlisted_sender = OutboundPolicy::from_parts(
            addr("finance@example.com"),
            vec![addr("other@example.com")],
            ["example.com".to_owned()],
            MAX_SEND_CAP,
        );
        assert_eq!(
            deny(unlisted_sender.decide(proposal(&["ana.lima@example.com"]))),
            DenyReason::SenderNotAllowed
        );
        let mut bad_thread = proposal(&["ana.lima@example.com"]);
        bad_thread.thread = Some(Thread {
            in_reply_to: "no-at-sign".into(),
            references: Vec::new(),
        });
        assert_eq!(deny(p.decide(bad_thread)), DenyReason::ThreadIdInvalid);
        let codes: HashSet<&str> = [
            DenyReason::SenderNotAllowed,
            DenyReason::RecipientDomainNotAllowed { refused: 1 },
            DenyReason::AddressInvalid { count: 1 },
            DenyReason::NoRecipients,
            DenyReason::TooManyRecipients { count: 1, max: 1 },
            DenyReason::HeaderInjection {
                field: HeaderField::Subject,
            },
            DenyReason::ReplyRecipientsDerived,
            DenyReason::ThreadIdInvalid,
            DenyReason::RateLimited {
                max_per_hour: 1,
                retry_after: Duration::from_secs(1),
            },
            DenyReason::MessageInvalid,
        ]
        .into_iter()
        .map(DenyReason::code)
        .collect();
        assert_eq!(codes.len(), 10, "codes are distinct");
    }

    // See: issue 8, finding 12 (raw VT/FF/ESC/BEL bytes went out in `Subject:`).
    #[test]
    fn issue_8_a_subject_with_control_characters_is_refused_naming_the_field() {
        let p = policy(&["example.com"]);
        for control in [
            "\u{b}",
            "\u{c}",
            "\u{1b}[31m",
            "\u{7}",
            "\t",
            "\u{7f}",
            "\u{9b}",
        ] {
            let mut bad = proposal(&["ana.lima@example.com"]);
            bad.subject = format!("Invoice{control} overdue");
            let reason = deny(p.decide(bad.clone()));
            assert_eq!(
                reason,
                DenyReason::HeaderInjection {
                    field: HeaderField::Subject
                },
                "{control:?}"
            );
            assert!(reason.to_string().starts_with("the subject contains"));
            assert_eq!(reason.code(), "HEADER_INJECTION");
            assert_eq!(p.preview(bad), Err(reason), "dry runs agree");
        }
        let mut reply = proposal(&["ana.lima@example.com"]);
        reply.thread = Some(Thread {
            in_reply_to: "<a@demo.example.com>".into(),
            references: vec!["<b\u{1b}@demo.example.com>".into()],
        });
        assert_eq!(
            deny(p.decide(reply)),
            DenyReason::HeaderInjection {
                field: HeaderField::References
            }
        );
    }

    #[test]
    fn derived_recipients_are_refused_even_when_they_would_be_allowed() {
        // The reply rule does not depend on what the recipients are: they are never derived.
        let p = policy(&["example.com", "example.org", "example.net"]);
        let mut reply = proposal(&["ana.lima@example.com"]);
        reply.recipients_from_original = true;
        reply.thread = Some(Thread {
            in_reply_to: "<orchard-1@demo.example.com>".into(),
            references: Vec::new(),
        });
        assert_eq!(deny(p.decide(reply)), DenyReason::ReplyRecipientsDerived);
    }

    #[test]
    fn threading_sets_headers_but_never_recipients() {
        let mut reply = proposal(&["ana.lima@example.com"]);
        reply.thread = Some(Thread {
            in_reply_to: "orchard-2@demo.example.com".into(),
            references: vec!["<orchard-1@demo.example.com>".into()],
        });
        let permit = allow(policy(&["example.com"]).decide(reply));
        assert_eq!(permit.envelope_recipients().len(), 1);
        let parsed = crate::read_back::parse(permit.bytes());
        assert_eq!(
            parsed.in_reply_to.as_deref(),
            Some("orchard-2@demo.example.com")
        );
        assert_eq!(
            parsed.references,
            ["orchard-1@demo.example.com", "orchard-2@demo.example.com"]
        );
        // A long chain keeps its newest ids, still parseable (folded, not cut).
        let mut long = proposal(&["ana.lima@example.com"]);
        long.thread = Some(Thread {
            in_reply_to: "<last@demo.example.com>".into(),
            references: (0..40)
                .map(|i| format!("<ancestor-{i:02}-{}@demo.example.com>", "x".repeat(40)))
                .collect(),
        });
        let permit = allow(policy(&["example.com"]).decide(long));
        let parsed = crate::read_back::parse(permit.bytes());
        assert_eq!(parsed.references.len(), MAX_REFERENCES);
        assert_eq!(
            parsed.references.last().map(String::as_str),
            Some("last@demo.example.com")
        );
        assert!(parsed.references[0].starts_with("ancestor-21-"));
        let text = String::from_utf8_lossy(permit.bytes()).into_owned();
        assert!(
            text.lines().all(|line| line.len() <= 998),
            "no over-long line"
        );
        assert_eq!(normalize_message_id("<a@b>").as_deref(), Some("<a@b>"));
        for bad in ["", "<>", "a b@c", "@b", "a@", "<<a@b>>", "ab"] {
            assert_eq!(normalize_message_id(bad), None, "{bad:?}");
        }
        assert!(normalize_message_id(&format!("{}@b", "a".repeat(MAX_MESSAGE_ID_LEN))).is_none());
    }

    #[test]
    fn the_cap_counts_permits_on_a_sliding_hour_and_previews_take_no_slot() {
        let p = OutboundPolicy::from_parts(
            addr("finance@example.com"),
            vec![addr("finance@example.com")],
            ["example.com".to_owned()],
            2,
        );
        let start = Instant::now();
        let ok = || proposal(&["ana.lima@example.com"]);
        for _ in 0..5 {
            assert!(p.preview(ok()).is_ok(), "a dry run takes no slot");
        }
        // Denied proposals take no slot either.
        let _ = deny(p.decide_at(proposal(&["x@evil.example.net"]), start));
        let _ = allow(p.decide_at(ok(), start));
        let _ = allow(p.decide_at(ok(), start + Duration::from_secs(60)));
        // Refused two minutes in: the first permit leaves the window 58 minutes later.
        assert_eq!(
            deny(p.decide_at(ok(), start + Duration::from_secs(120))),
            DenyReason::RateLimited {
                max_per_hour: 2,
                retry_after: Duration::from_secs(58 * 60)
            }
        );
        assert!(matches!(
            p.preview(ok()),
            Err(DenyReason::RateLimited {
                max_per_hour: 2,
                ..
            })
        ));
        // One hour after the first permit, one slot is free again; the second is still taken,
        // until an hour after it.
        let later = start + CAP_WINDOW;
        let _ = allow(p.decide_at(ok(), later));
        assert_eq!(
            deny(p.decide_at(ok(), later)),
            DenyReason::RateLimited {
                max_per_hour: 2,
                retry_after: Duration::from_secs(60)
            }
        );
    }

    #[test]
    fn the_cap_hints_when_the_oldest_send_leaves_the_window() {
        let p = OutboundPolicy::from_parts(
            addr("finance@example.com"),
            vec![addr("finance@example.com")],
            ["example.com".to_owned()],
            1,
        );
        let start = Instant::now();
        let ok = || proposal(&["ana.lima@example.com"]);
        let _ = allow(p.decide_at(ok(), start));
        let at = start + Duration::from_millis(1_500);
        let reason = deny(p.decide_at(ok(), at));
        assert_eq!(
            reason,
            DenyReason::RateLimited {
                max_per_hour: 1,
                retry_after: CAP_WINDOW - Duration::from_millis(1_500)
            }
        );
        // 3598.5 s rounds up: a retry after 3598 s would still be refused.
        assert_eq!(reason.retry_after_secs(), Some(3_599));
        assert!(reason.to_string().ends_with("retry in 3599 s"), "{reason}");
        // The dry run reports the same hint on the real clock: at most the window.
        let preview = p.preview(ok()).expect_err("full");
        assert!(
            preview
                .retry_after_secs()
                .is_some_and(|s| (1..=3_600).contains(&s))
        );
        // Waiting exactly the hint is enough.
        let _ = allow(p.decide_at(ok(), at + CAP_WINDOW - Duration::from_millis(1_500)));
        // Sub-second waits still say 1 s; other refusals have no hint.
        assert_eq!(whole_secs_up(Duration::from_millis(1)), 1);
        assert_eq!(whole_secs_up(Duration::ZERO), 1);
        assert_eq!(whole_secs_up(Duration::from_secs(5)), 5);
        assert_eq!(DenyReason::NoRecipients.retry_after_secs(), None);
    }

    #[test]
    fn a_poisoned_cap_fails_closed() {
        let p = policy(&["example.com"]);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _guard = p.cap.issued.lock().unwrap();
            panic!("poison the lock");
        }));
        assert!(p.cap.issued.is_poisoned());
        assert_eq!(
            deny(p.decide(proposal(&["ana.lima@example.com"]))).retry_after_secs(),
            Some(3_600),
            "refused, with a whole window as the hint"
        );
        assert!(p.preview(proposal(&["ana.lima@example.com"])).is_err());
    }

    #[test]
    fn fuzz_entry_point_accepts_and_refuses() {
        // Allowed, refused by domain, refused by injection, refused by sender; none trips the
        // oracle. The oracle itself is exercised by the property tests' expectations.
        let sep = '\u{1f}';
        for (flags, text) in [
            (
                1_u8,
                format!("example.com{sep}a@example.com{sep}{sep}{sep}Hi{sep}"),
            ),
            (
                1,
                format!("example.com{sep}a@evil.example.com{sep}{sep}{sep}Hi{sep}"),
            ),
            (
                3,
                format!("example.com{sep}a@example.com{sep}{sep}{sep}Hi\r\nBcc: x{sep}<a@b>"),
            ),
            (
                0,
                format!("example.com{sep}a@example.com{sep}{sep}{sep}Hi{sep}"),
            ),
            (
                3,
                format!("Example.COM{sep}A@EXAMPLE.com{sep}{sep}b@example.com{sep}Hi{sep}a\0@b"),
            ),
            // Issue 8, finding 12: a subject with an escape sequence trips the oracle if allowed.
            (
                1,
                format!("example.com{sep}a@example.com{sep}{sep}{sep}Hi\u{1b}[2J\u{7}{sep}"),
            ),
            // Issue 8, finding 11: a bang path in a listed domain trips the oracle if allowed.
            (
                1,
                format!("example.com{sep}evil.example.net!x@example.com{sep}{sep}{sep}Hi{sep}"),
            ),
        ] {
            let mut data = vec![flags];
            data.extend_from_slice(text.as_bytes());
            fuzz_outbound(&data);
        }
        fuzz_outbound(&[]);
    }

    // --- property laws ---------------------------------------------------------------------

    const POOL: [&str; 7] = [
        "example.com",
        "example.org",
        "example.net",
        "evil.example.com",
        "notexample.com",
        "sub.example.org",
        "example.co",
    ];

    fn recipient() -> impl Strategy<Value = String> {
        prop_oneof![
            8 => ("[a-z][a-z0-9.]{0,6}[a-z0-9]", prop::sample::select(POOL.to_vec()))
                .prop_map(|(local, domain)| format!("{local}@{domain}")),
            1 => prop::sample::select(vec![
                "not an address", "a@", "@example.com", "a@@example.com", "<a@example.com>",
            ]).prop_map(str::to_owned),
            1 => routed_recipient(),
        ]
    }

    /// An address in a listed domain whose local part carries routing, quoting or escape syntax
    /// (issue 8, finding 11): the domain check alone would pass it.
    fn routed_recipient() -> impl Strategy<Value = String> {
        (
            "[a-z0-9.]{0,6}",
            prop::sample::select(vec![
                "!",
                "%",
                "=",
                "/",
                "|",
                "&",
                ":",
                ",",
                "\\",
                "\"",
                "evil.example.net!",
                "%evil.example.net",
                "@evil.example.net:",
                "srs0=x=y=evil.example.net=",
            ]),
            "[a-z0-9.]{0,6}",
            prop::sample::select(POOL.to_vec()),
            any::<bool>(),
        )
            .prop_map(|(before, routing, after, domain, quoted)| {
                if quoted {
                    format!("\"{before}{routing}{after}\"@{domain}")
                } else {
                    format!("{before}{routing}{after}@{domain}")
                }
            })
    }

    /// No byte below 0x20 in the header section but CRLF line ends and the leading SP/HT of a
    /// folded line, and no DEL.
    fn clean_header_section(raw: &[u8]) -> bool {
        let end = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or(raw.len());
        raw[..end].split(|b| *b == b'\n').all(|line| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            line.iter()
                .enumerate()
                .all(|(i, b)| (*b >= 0x20 && *b != 0x7f) || (i == 0 && *b == b'\t'))
        })
    }

    /// True when the local part (before the last `@`) is all allowlisted bytes.
    fn plain_local_part(raw: &str) -> bool {
        raw.rsplit_once('@')
            .is_some_and(|(local, _)| local.bytes().all(crate::address::is_local_part_byte))
    }

    fn recipients() -> impl Strategy<Value = Vec<String>> {
        prop::collection::vec(recipient(), 0..5)
    }

    fn arb_proposal() -> impl Strategy<Value = Proposal> {
        (recipients(), recipients(), recipients(), "[ -~]{1,30}").prop_map(
            |(to, cc, bcc, subject)| Proposal {
                to,
                cc,
                bcc,
                subject,
                body: "body".into(),
                ..Proposal::default()
            },
        )
    }

    fn domain_set() -> impl Strategy<Value = Vec<String>> {
        prop::sample::subsequence(POOL.to_vec(), 0..=POOL.len())
            .prop_map(|ds| ds.into_iter().map(str::to_owned).collect())
    }

    fn policy_with(sender_listed: bool, domains: &[String]) -> OutboundPolicy {
        let from = addr("finance@example.com");
        let senders = if sender_listed {
            vec![from.clone(), addr("other@example.com")]
        } else {
            vec![addr("other@example.com")]
        };
        OutboundPolicy::from_parts(from, senders, domains.iter().cloned(), MAX_SEND_CAP)
    }

    /// The verdict without the permit's random Message-ID: `Ok(envelope)` or the code.
    fn verdict(decision: Decision) -> Result<Vec<String>, &'static str> {
        match decision {
            Decision::Allow(permit) => {
                let mut rcpt: Vec<String> = permit
                    .envelope_recipients()
                    .iter()
                    .map(|a| a.as_str().to_owned())
                    .collect();
                rcpt.sort();
                Ok(rcpt)
            }
            Decision::Deny(reason) => Err(reason.code()),
        }
    }

    fn upper_domain(raw: &str) -> String {
        match raw.rsplit_once('@') {
            Some((local, domain)) => format!("{local}@{}", domain.to_ascii_uppercase()),
            None => raw.to_owned(),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn narrowing_an_allowlist_never_turns_a_denial_into_a_permit(
            p in arb_proposal(),
            domains in domain_set(),
            keep in prop::collection::vec(any::<bool>(), POOL.len()),
            sender_listed in any::<bool>(),
            narrow_sender in any::<bool>(),
        ) {
            let wide = policy_with(sender_listed, &domains);
            let narrowed: Vec<String> = domains
                .iter()
                .zip(&keep)
                .filter(|(_, keep)| **keep)
                .map(|(d, _)| d.clone())
                .collect();
            let narrow = policy_with(sender_listed && !narrow_sender, &narrowed);
            let wide_verdict = verdict(wide.decide(p.clone()));
            let narrow_verdict = verdict(narrow.decide(p));
            if wide_verdict.is_err() {
                prop_assert!(narrow_verdict.is_err(), "narrowing allowed {:?}", narrow_verdict);
            }
            if narrow_verdict.is_ok() {
                prop_assert_eq!(narrow_verdict, wide_verdict);
            }
        }

        #[test]
        fn recipient_order_and_domain_case_are_irrelevant(
            p in arb_proposal(),
            domains in domain_set(),
            seed in any::<u64>(),
        ) {
            let policy = policy_with(true, &domains);
            let mut shuffled = p.clone();
            for list in [&mut shuffled.to, &mut shuffled.cc, &mut shuffled.bcc] {
                list.reverse();
                if !list.is_empty() {
                    let len = list.len();
                    list.rotate_left(usize::try_from(seed).unwrap_or(0) % len);
                }
                for raw in list.iter_mut() {
                    *raw = upper_domain(raw);
                }
            }
            let upper_list: Vec<String> = domains.iter().map(|d| d.to_ascii_uppercase()).collect();
            let upper_policy = OutboundPolicy::new(&settings(&upper_list));
            let a = verdict(policy.decide(p));
            let b = verdict(policy_with(true, &domains).decide(shuffled.clone()));
            prop_assert_eq!(&a, &b);
            // Domains configured in upper case (lower-cased by Domain::parse) change nothing.
            prop_assert_eq!(&a, &verdict(upper_policy.decide(shuffled)));
        }

        #[test]
        fn every_permits_recipients_are_in_allowed_domains(
            p in arb_proposal(),
            domains in domain_set(),
        ) {
            if let Decision::Allow(permit) = policy_with(true, &domains).decide(p) {
                for address in permit.envelope_recipients() {
                    let domain = address.as_str().rsplit_once('@').map(|(_, d)| d).unwrap_or("");
                    prop_assert!(domains.iter().any(|d| d == domain), "{} not listed", domain);
                    prop_assert!(plain_local_part(address.as_str()), "routed local part allowed");
                }
                prop_assert!(header_value(permit.bytes(), "bcc").is_none());
                prop_assert!(clean_header_section(permit.bytes()), "a raw control in a header");
            }
        }

        /// See: issue 8, finding 11. One routed recipient anywhere (to, cc or bcc) refuses the
        /// whole message, with every domain listed.
        #[test]
        fn issue_8_a_recipient_with_routing_syntax_is_never_allowed(
            p in arb_proposal(),
            routed in routed_recipient(),
            list in 0_usize..3,
        ) {
            let mut p = p;
            match list {
                0 => p.to.push(routed),
                1 => p.cc.push(routed),
                _ => p.bcc.push(routed),
            }
            let all = POOL.iter().map(|d| (*d).to_owned()).collect::<Vec<_>>();
            let verdict = verdict(policy_with(true, &all).decide(p));
            prop_assert!(verdict.is_err(), "allowed {:?}", verdict);
        }

        /// See: issue 8, finding 12 for the controls beyond CR, LF and NUL.
        #[test]
        fn every_header_value_with_a_control_character_is_denied(
            p in arb_proposal(),
            before in "[ -~]{0,10}",
            after in "[ -~]{0,10}",
            sep in prop::sample::select(vec![
                "\r", "\n", "\0", "\r\n", "\u{b}", "\u{c}", "\u{1b}[2J", "\u{7}", "\t", "\u{7f}",
                "\u{85}", "\u{9b}", "\u{2028}", "\u{2029}",
            ]),
            place in 0_usize..3,
        ) {
            let bad = format!("{before}{sep}{after}");
            let mut p = p;
            match place {
                0 => p.subject = bad,
                1 => p.thread = Some(Thread { in_reply_to: bad, references: Vec::new() }),
                _ => p.thread = Some(Thread {
                    in_reply_to: "<a@example.com>".into(),
                    references: vec![bad],
                }),
            }
            let all = POOL.iter().map(|d| (*d).to_owned()).collect::<Vec<_>>();
            prop_assert_eq!(verdict(policy_with(true, &all).decide(p)), Err("HEADER_INJECTION"));
        }

        #[test]
        fn the_fuzz_oracle_holds(data in prop::collection::vec(any::<u8>(), 0..200)) {
            fuzz_outbound(&data);
        }
    }

    /// Send settings as startup resolves them, through the real `Domain` parser.
    fn settings(domains: &[String]) -> SendSettings {
        SendSettings {
            from_alias: crate::alias::Alias::parse("finance").unwrap(),
            from: addr("finance@example.com"),
            allowed_senders: vec![addr("finance@example.com")],
            recipient_domains: domains
                .iter()
                .map(|d| crate::address::Domain::parse(d).unwrap())
                .collect(),
            recipient_domains_defaulted: false,
            max_per_hour: MAX_SEND_CAP,
            smtp_secret: None,
        }
    }
}
