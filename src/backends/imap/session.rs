//! The IMAP commands the store issues, on one pooled connection: open a folder (EXAMINE for
//! reads, SELECT for writes), LIST, STATUS, UID SEARCH, UID FETCH, UID STORE, and the three
//! commands whose answer carries the new UIDs in a response code (APPEND → `APPENDUID`, UID COPY
//! and UID MOVE → `COPYUID`, RFC 4315), which async-imap runs but does not report, so they are
//! sent here and their responses read to the tagged end.
//!
//! Every mailbox name goes on the wire through [`query::quote`] (printable ASCII only, quoted)
//! and every search through [`query::Criteria`]; no caller string is formatted into a command
//! any other way. A command is always read to its tagged completion, so the connection is in
//! step when the pool takes it back.

use futures::TryStreamExt as _;
use imap_proto::rfc4315::UidSetMember;
use imap_proto::{NameAttribute, Response, ResponseCode, Status};

use super::pool::{Conn, OpError, Selected};
use super::query::{self, Criteria};
use crate::backends::BackendError;
use crate::backends::model::WellKnown;

/// One folder as LIST reports it.
#[derive(Clone, Debug)]
pub(crate) struct Listed {
    /// The wire name (modified UTF-7).
    pub(crate) wire: String,
    pub(crate) delimiter: Option<String>,
    /// The well-known folder its special-use attribute (RFC 6154) makes it.
    pub(crate) special: Option<WellKnown>,
    pub(crate) selectable: bool,
}

/// Folders listed at most.
pub(crate) const MAX_FOLDERS: usize = 1_000;

/// `name` quoted for the wire, or `BadId` (a forged or unusable name never reaches it).
pub(super) fn mailbox(name: &str) -> Result<String, OpError> {
    query::quote(name).map_err(|_| OpError::Backend(BackendError::BadId))
}

/// The connection ended while async-imap was reading an answer, which it then returns as if
/// complete: the answer is not one.
fn lost() -> OpError {
    OpError::Imap(async_imap::error::Error::ConnectionLost)
}

/// A flag that is a keyword (IMAP's label: not a system flag), by name.
pub(super) fn keyword(flag: &async_imap::types::Flag<'_>) -> Option<String> {
    match flag {
        async_imap::types::Flag::Custom(k) => Some(k.to_string()),
        _ => None,
    }
}

impl Conn {
    /// `Err` when the server's side of the connection has ended (see [`lost`]).
    pub(super) fn intact(&self) -> Result<(), OpError> {
        if self.session.get_ref().hit_eof() {
            Err(lost())
        } else {
            Ok(())
        }
    }

    /// Opens `wire` (read-only unless `writable`) unless it is already open that way; returns its
    /// UIDVALIDITY. A folder that does not exist is `NotFound`.
    pub(crate) async fn open(&mut self, wire: &str, writable: bool) -> Result<u32, OpError> {
        if let Some(selected) = &self.selected
            && selected.name == wire
            && (selected.writable || !writable)
        {
            return Ok(selected.uid_validity);
        }
        // Checked as ours would quote it; async-imap quotes the raw name itself.
        mailbox(wire)?;
        self.reopen(wire, writable)
            .await
            .map(|(uid_validity, _)| uid_validity)
    }

    /// SELECTs (or EXAMINEs) `wire` whatever is open: its UIDVALIDITY and what the server said
    /// of it (flags, counts).
    async fn reopen(
        &mut self,
        wire: &str,
        writable: bool,
    ) -> Result<(u32, async_imap::types::Mailbox), OpError> {
        self.selected = None;
        let opened = if writable {
            self.session.select(wire).await
        } else {
            self.session.examine(wire).await
        };
        let opened = opened.map_err(|e| match e {
            async_imap::error::Error::No(_) => OpError::Backend(BackendError::NotFound),
            other => OpError::Imap(other),
        })?;
        self.intact()?;
        let uid_validity = opened
            .uid_validity
            .ok_or(OpError::Backend(BackendError::Malformed))?;
        self.selected = Some(Selected {
            name: wire.to_owned(),
            writable,
            uid_validity,
        });
        Ok((uid_validity, opened))
    }

    /// The keywords (IMAP's labels: the flags that are not system flags) the inbox shows in
    /// its FLAGS and PERMANENTFLAGS, sorted, each once.
    pub(crate) async fn keywords(&mut self) -> Result<Vec<String>, OpError> {
        let (_, opened) = self.reopen("INBOX", false).await?;
        let mut keywords: Vec<String> = opened
            .flags
            .iter()
            .chain(&opened.permanent_flags)
            .filter_map(keyword)
            .collect();
        keywords.sort();
        keywords.dedup();
        Ok(keywords)
    }

    /// Every folder (`LIST "" "*"`), at most [`MAX_FOLDERS`].
    pub(crate) async fn list(&mut self) -> Result<Vec<Listed>, OpError> {
        let names: Vec<_> = self
            .session
            .list(Some(""), Some("*"))
            .await?
            .try_collect()
            .await?;
        self.intact()?;
        Ok(names
            .iter()
            .map(|n| (unescape(n.name()), n))
            .filter(|(wire, _)| super::ids::is_wire_name(wire))
            .take(MAX_FOLDERS)
            .map(|(wire, n)| {
                let attributes = n.attributes();
                let special = attributes.iter().find_map(|a| match a {
                    NameAttribute::Sent => Some(WellKnown::SentItems),
                    NameAttribute::Drafts => Some(WellKnown::Drafts),
                    NameAttribute::Archive => Some(WellKnown::Archive),
                    NameAttribute::Junk => Some(WellKnown::JunkEmail),
                    NameAttribute::Trash => Some(WellKnown::DeletedItems),
                    _ => None,
                });
                Listed {
                    delimiter: n.delimiter().map(str::to_owned),
                    special: if wire.eq_ignore_ascii_case("INBOX") {
                        Some(WellKnown::Inbox)
                    } else {
                        special
                    },
                    wire,
                    selectable: !attributes.iter().any(|a| {
                        matches!(a, NameAttribute::NoSelect)
                            || matches!(a, NameAttribute::Extension(e) if e.eq_ignore_ascii_case("\\NonExistent"))
                    }),
                }
            })
            .collect())
    }

    /// `(messages, unseen)` of a folder by STATUS (no need to open it).
    pub(crate) async fn status(&mut self, wire: &str) -> Result<(u64, u64), OpError> {
        mailbox(wire)?;
        let status = self
            .session
            .status(wire, "(MESSAGES UNSEEN)")
            .await
            .map_err(|e| match e {
                async_imap::error::Error::No(_) => OpError::Backend(BackendError::NotFound),
                other => OpError::Imap(other),
            })?;
        self.intact()?;
        Ok((
            u64::from(status.exists),
            u64::from(status.unseen.unwrap_or(0)),
        ))
    }

    /// The UIDs matching `criteria` in the open folder, ascending.
    pub(crate) async fn search(&mut self, criteria: &Criteria) -> Result<Vec<u32>, OpError> {
        let arguments = criteria
            .to_arguments()
            .map_err(|_| OpError::Backend(BackendError::Unsupported("imap")))?;
        let mut uids: Vec<u32> = self
            .session
            .uid_search(&arguments)
            .await?
            .into_iter()
            .collect();
        self.intact()?;
        uids.sort_unstable();
        Ok(uids)
    }

    /// `UID FETCH` of `uids` with `items`, read to the end; answers for other messages (a
    /// server may volunteer flag changes) are dropped.
    pub(crate) async fn fetch(
        &mut self,
        uids: &[u32],
        items: &str,
    ) -> Result<Vec<async_imap::types::Fetch>, OpError> {
        if uids.is_empty() {
            return Ok(Vec::new());
        }
        self.fetch_set(&query::uid_set(uids), items, |u| {
            uids.binary_search(&u).is_ok()
        })
        .await
    }

    /// `UID FETCH <set> <items>` read to the end, keeping the answers whose UID `wanted` takes
    /// (a server may volunteer others).
    pub(super) async fn fetch_set(
        &mut self,
        set: &str,
        items: &str,
        wanted: impl Fn(u32) -> bool,
    ) -> Result<Vec<async_imap::types::Fetch>, OpError> {
        let fetched: Vec<_> = self
            .session
            .uid_fetch(set, items)
            .await?
            .try_collect()
            .await?;
        self.intact()?;
        Ok(fetched
            .into_iter()
            .filter(|f| f.uid.is_some_and(&wanted))
            .collect())
    }

    /// Adds or removes `\Seen` on `uids` of the open (selected) folder; returns the UIDs the
    /// server reported, i.e. those that exist.
    pub(crate) async fn store_seen(
        &mut self,
        uids: &[u32],
        read: bool,
    ) -> Result<Vec<u32>, OpError> {
        let set = query::uid_set(uids);
        let change = if read {
            "+FLAGS (\\Seen)"
        } else {
            "-FLAGS (\\Seen)"
        };
        let answered: Vec<_> = self
            .session
            .uid_store(&set, change)
            .await?
            .try_collect()
            .await?;
        self.intact()?;
        Ok(answered.iter().filter_map(|f| f.uid).collect())
    }

    /// `APPEND` of `raw` to `wire` with `flags` (e.g. `\Seen \Draft`); the new message's
    /// `(uidvalidity, uid)` when the server says (`APPENDUID`).
    pub(crate) async fn append(
        &mut self,
        wire: &str,
        flags: &str,
        raw: &[u8],
    ) -> Result<Option<(u32, u32)>, OpError> {
        use tokio::io::AsyncWriteExt as _;
        let quoted = mailbox(wire)?;
        let id = self
            .session
            .run_command(format!("APPEND {quoted} ({flags}) {{{}}}", raw.len()))
            .await?;
        // The server asks for the literal, or refuses at once (a missing folder, over quota).
        let first = self
            .session
            .read_response()
            .await?
            .ok_or(async_imap::error::Error::ConnectionLost)?;
        match first.parsed() {
            Response::Continue(_) => {}
            Response::Done { tag, status, .. } if *tag == id => {
                return Err(refusal(status));
            }
            _ => return Err(OpError::Backend(BackendError::Malformed)),
        }
        let stream = self.session.get_mut();
        stream.write_all(raw).await?;
        stream.write_all(b"\r\n").await?;
        stream.flush().await?;
        let codes = self.finish(&id).await?;
        Ok(codes.into_iter().find_map(|c| match c {
            Code::AppendUid(validity, uid) => Some((validity, uid)),
            Code::CopyUid(..) => None,
        }))
    }

    /// `UID MOVE` (`verb` = "MOVE") or `UID COPY` of `uids` from the open folder to `wire`;
    /// `(destination uidvalidity, [(source uid, new uid)])` when the server says (`COPYUID`).
    pub(crate) async fn relocate(
        &mut self,
        verb: &'static str,
        uids: &[u32],
        wire: &str,
    ) -> Result<Option<(u32, Vec<(u32, u32)>)>, OpError> {
        let quoted = mailbox(wire)?;
        let id = self
            .session
            .run_command(format!("UID {verb} {} {quoted}", query::uid_set(uids)))
            .await?;
        let codes = self.finish(&id).await?;
        Ok(codes.into_iter().find_map(|c| match c {
            Code::CopyUid(validity, pairs) => Some((validity, pairs)),
            Code::AppendUid(..) => None,
        }))
    }

    /// Reads to the tagged completion of `id`, keeping the UIDPLUS codes met on the way (MOVE
    /// reports `COPYUID` in an untagged OK, COPY and APPEND in the tagged one).
    async fn finish(&mut self, id: &imap_proto::RequestId) -> Result<Vec<Code>, OpError> {
        let mut codes = Vec::new();
        self.read_to_done(id, |response| match response {
            Response::Done { outcome, .. }
            | Response::Data {
                status: Status::Ok,
                outcome,
            } => codes.extend(outcome.code.as_ref().and_then(Code::of)),
            // EXPUNGE, EXISTS, FETCH flag updates: the folder view moves on; nothing to keep.
            _ => {}
        })
        .await
        .map(|()| codes)
    }

    /// Reads to the tagged completion of `id`, handing `visit` every response on the way and
    /// the tagged one last when it is OK. A tagged NO or BAD is the server's refusal, an
    /// untagged BYE a lost connection.
    pub(super) async fn read_to_done(
        &mut self,
        id: &imap_proto::RequestId,
        mut visit: impl FnMut(&Response<'_>),
    ) -> Result<(), OpError> {
        loop {
            let response = self
                .session
                .read_response()
                .await?
                .ok_or(async_imap::error::Error::ConnectionLost)?;
            let parsed = response.parsed();
            match parsed {
                Response::Done { tag, status, .. } if tag == id => {
                    if *status != Status::Ok {
                        return Err(refusal(status));
                    }
                    visit(parsed);
                    return Ok(());
                }
                Response::Data {
                    status: Status::Bye,
                    ..
                } => return Err(OpError::Imap(async_imap::error::Error::ConnectionLost)),
                other => visit(other),
            }
        }
    }
}

/// The mailbox name LIST sent as a quoted string, unescaped: imap-proto hands a quoted string
/// over with its `\"` and `\\` escapes in place, and quoting it again for SELECT would double
/// them (the folder would be unreachable). A name holding a lone `"` or `\` cannot have come
/// quoted (it came as a literal, which has no escapes) and is kept as it is.
fn unescape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped @ ('\\' | '"')) => out.push(escaped),
                _ => return name.to_owned(),
            },
            '"' => return name.to_owned(),
            other => out.push(other),
        }
    }
    out
}

/// A tagged NO or BAD: the server refused the command (the folder is missing, the UID set is
/// bad, the quota is full); the connection itself is fine.
fn refusal(status: &Status) -> OpError {
    match status {
        Status::No => OpError::Backend(BackendError::NotFound),
        _ => OpError::Backend(BackendError::Malformed),
    }
}

/// The UIDPLUS response codes, owned.
enum Code {
    AppendUid(u32, u32),
    CopyUid(u32, Vec<(u32, u32)>),
}

impl Code {
    fn of(code: &ResponseCode<'_>) -> Option<Self> {
        match code {
            ResponseCode::AppendUid(validity, uids) => {
                let uids = expand(uids)?;
                (uids.len() == 1).then(|| Code::AppendUid(*validity, uids[0]))
            }
            ResponseCode::CopyUid(validity, source, destination) => {
                let (source, destination) = (expand(source)?, expand(destination)?);
                (source.len() == destination.len()).then(|| {
                    Code::CopyUid(*validity, source.into_iter().zip(destination).collect())
                })
            }
            _ => None,
        }
    }
}

/// The UIDs of a UID set, in its order (RFC 4315 pairs source and destination by position);
/// `None` for a set too large to be an answer to our command.
fn expand(set: &[UidSetMember]) -> Option<Vec<u32>> {
    const MAX: usize = 100_000;
    let mut uids = Vec::new();
    for member in set {
        match member {
            UidSetMember::Uid(u) => uids.push(*u),
            UidSetMember::UidRange(range) => {
                let (start, end) = (*range.start(), *range.end());
                let (low, high) = (start.min(end), start.max(end));
                if (high - low) as usize >= MAX || uids.len() + ((high - low) as usize) >= MAX {
                    return None;
                }
                if start <= end {
                    uids.extend(low..=high);
                } else {
                    uids.extend((low..=high).rev());
                }
            }
        }
    }
    (uids.len() <= MAX).then_some(uids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_list_names_are_unescaped_and_literals_kept() {
        assert_eq!(
            unescape(r#"Relat&APM-rios \"Q1\" a\\b"#),
            r#"Relat&APM-rios "Q1" a\b"#
        );
        assert_eq!(unescape("INBOX/Projects"), "INBOX/Projects");
        // A lone quote or backslash: a literal, taken as it is.
        assert_eq!(unescape(r#"a"b"#), r#"a"b"#);
        assert_eq!(unescape(r"a\b"), r"a\b");
        assert_eq!(unescape(r"trailing\"), r"trailing\");
    }

    #[test]
    fn uid_sets_expand_in_order_and_refuse_what_no_command_of_ours_could_answer() {
        let set = vec![
            UidSetMember::Uid(7),
            UidSetMember::UidRange(3..=5),
            // RFC 4315 allows a descending range; the pairing is by position.
            UidSetMember::UidRange(std::ops::RangeInclusive::new(10, 8)),
        ];
        assert_eq!(expand(&set), Some(vec![7, 3, 4, 5, 10, 9, 8]));
        assert_eq!(expand(&[UidSetMember::UidRange(1..=u32::MAX)]), None);
        let pairs = Code::of(&ResponseCode::CopyUid(
            9,
            vec![UidSetMember::UidRange(1..=2)],
            vec![UidSetMember::UidRange(20..=21)],
        ));
        assert!(matches!(pairs, Some(Code::CopyUid(9, p)) if p == vec![(1, 20), (2, 21)]));
        // Unequal halves cannot be paired: no ids rather than wrong ones.
        let unequal = Code::of(&ResponseCode::CopyUid(
            9,
            vec![UidSetMember::Uid(1)],
            vec![UidSetMember::UidRange(20..=21)],
        ));
        assert!(unequal.is_none());
        let appended = Code::of(&ResponseCode::AppendUid(3, vec![UidSetMember::Uid(44)]));
        assert!(matches!(appended, Some(Code::AppendUid(3, 44))));
    }
}
