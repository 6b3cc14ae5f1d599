//! The IMAP change feed for the local index. A folder's cursor is its state as `EXAMINE`
//! reports it: UIDVALIDITY, UIDNEXT, the message count and, when the server has CONDSTORE
//! (RFC 7162), its HIGHESTMODSEQ. With CONDSTORE an untouched folder costs one `EXAMINE` (a
//! flag change raises
//! HIGHESTMODSEQ, a delivery UIDNEXT, an expunge lowers the count unless a delivery also raised
//! UIDNEXT), and a touched one answers `UID FETCH 1:* (UID FLAGS MODSEQ) (CHANGEDSINCE <modseq>)`
//! for what is new or changed plus every UID the folder holds (`UID SEARCH ALL`) for what went
//! away (QRESYNC's `VANISHED` would need `ENABLE QRESYNC` before any folder is opened on a pooled
//! connection, which the pool cannot promise). Without CONDSTORE a flag change is invisible in
//! the folder's state, so every call answers the whole inventory. An inventory is paged by
//! [`INVENTORY_PAGE`] UIDs; its pages carry the state read before the first one, so whatever
//! changes while they are read is answered by the next sync. A new UIDVALIDITY is a reset.
//! The index's message reads are batched here too ([`ImapStore::fetch_for_index`]).

use std::time::Instant;

use async_imap::types::{Fetch, Flag};
use imap_proto::{MailboxDatum, Response, ResponseCode, Status};

use super::ids::MessageRef;
use super::pool::{Conn, OpError, Repeat, Selected, with_conn};
use super::query::Criteria;
use super::session::mailbox;
use super::{
    ImapStore, TEXT_BATCH, batch_end, detail, message_items, open_current, section_path, structure,
};
use crate::backends::BackendError;
use crate::backends::changes::{AttachmentWant, FolderDelta, FolderSync, IndexFetch, SyncItem};
use crate::backends::model::AttachmentMeta;

/// UIDs one inventory page answers at most.
pub(crate) const INVENTORY_PAGE: usize = 5_000;

const CURSOR_PREFIX: &str = "imap1:";

/// A folder's state as `EXAMINE` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct State {
    pub(crate) uid_validity: u32,
    pub(crate) uid_next: u32,
    /// HIGHESTMODSEQ; `None` without CONDSTORE (or for a folder without persistent
    /// mod-sequences), where no shortcut is safe.
    pub(crate) modseq: Option<u64>,
    pub(crate) messages: u32,
}

/// What the index hands back: the state a sync answered up to, and during an inventory the
/// last UID its pages answered so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cursor {
    pub(crate) state: State,
    pub(crate) after: Option<u32>,
}

impl Cursor {
    /// `imap1:<uidvalidity>:<uidnext>:<modseq|->:<messages>[:<after uid>]`.
    pub(crate) fn encode(&self) -> String {
        let s = &self.state;
        let modseq = s.modseq.map_or_else(|| "-".to_owned(), |m| m.to_string());
        let mut out = format!(
            "{CURSOR_PREFIX}{}:{}:{modseq}:{}",
            s.uid_validity, s.uid_next, s.messages
        );
        if let Some(after) = self.after {
            out.push_str(&format!(":{after}"));
        }
        out
    }

    /// A cursor [`Cursor::encode`] wrote; `None` for anything else (the caller resets).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let rest = text.strip_prefix(CURSOR_PREFIX)?;
        let parts: Vec<&str> = rest.split(':').collect();
        if !(4..=5).contains(&parts.len()) {
            return None;
        }
        let modseq = match parts[2] {
            "-" => None,
            m => Some(number::<u64>(m)?),
        };
        let after = match parts.get(4) {
            Some(a) => Some(number(a)?),
            None => None,
        };
        let cursor = Self {
            state: State {
                uid_validity: number(parts[0])?,
                uid_next: number(parts[1])?,
                modseq,
                messages: number(parts[3])?,
            },
            after,
        };
        // Canonical only, so one state has exactly one cursor.
        (cursor.encode() == text).then_some(cursor)
    }
}

/// A decimal number of at most 20 digits.
fn number<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The name of a flag as the wire spells it.
fn flag_name(flag: &Flag<'_>) -> String {
    match flag {
        Flag::Seen => "\\Seen".to_owned(),
        Flag::Answered => "\\Answered".to_owned(),
        Flag::Flagged => "\\Flagged".to_owned(),
        Flag::Deleted => "\\Deleted".to_owned(),
        Flag::Draft => "\\Draft".to_owned(),
        Flag::Recent => "\\Recent".to_owned(),
        Flag::MayCreate => "\\*".to_owned(),
        Flag::Custom(name) => name.to_string(),
    }
}

/// A message's version: its flags sorted, then its MODSEQ when the server keeps them. `\Recent`
/// is left out: it belongs to the session that saw the message first, so it would change the
/// version whenever another client opened the folder.
fn version(f: &Fetch) -> String {
    let mut flags: Vec<String> = f
        .flags()
        .filter(|flag| *flag != Flag::Recent)
        .map(|flag| flag_name(&flag))
        .collect();
    flags.sort_unstable();
    flags.dedup();
    let mut out = flags.join(" ");
    if let Some(modseq) = f.modseq {
        out.push_str(&format!("#{modseq}"));
    }
    out
}

/// How a store reads a change feed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct How {
    /// Use CONDSTORE (the server has it and the store allows it).
    pub(crate) condstore: bool,
    /// UIDs per inventory page.
    pub(crate) page: usize,
}

fn reset() -> FolderSync {
    FolderSync {
        delta: FolderDelta::Reset,
        cursor: None,
        more: false,
    }
}

impl Conn {
    /// Opens `wire` read-only and returns its state from the EXAMINE answer, with
    /// HIGHESTMODSEQ when `condstore` (`EXAMINE … (CONDSTORE)`, RFC 7162 §3.1.8, which
    /// async-imap does not send, so it is sent here and its answer read to the tagged end).
    /// Not `STATUS`: on the folder a session has open (a pooled connection may still have it),
    /// Dovecot answers STATUS from that session's stale view. A missing folder is `NotFound`.
    pub(crate) async fn examine_state(
        &mut self,
        wire: &str,
        condstore: bool,
    ) -> Result<State, OpError> {
        let quoted = mailbox(wire)?;
        self.selected = None;
        let command = if condstore {
            format!("EXAMINE {quoted} (CONDSTORE)")
        } else {
            format!("EXAMINE {quoted}")
        };
        let id = self.session.run_command(command).await?;
        let (mut uid_validity, mut uid_next, mut modseq, mut messages) = (None, None, None, None);
        self.read_to_done(&id, |response| match response {
            Response::Done { outcome, .. }
            | Response::Data {
                status: Status::Ok,
                outcome,
            } => match outcome.code {
                Some(ResponseCode::UidValidity(v)) => uid_validity = Some(v),
                Some(ResponseCode::UidNext(n)) => uid_next = Some(n),
                Some(ResponseCode::HighestModSeq(m)) => modseq = Some(m),
                _ => {}
            },
            Response::MailboxData(MailboxDatum::Exists(n)) => messages = Some(*n),
            _ => {}
        })
        .await?;
        let state = State {
            uid_validity: uid_validity.ok_or(OpError::Backend(BackendError::Malformed))?,
            uid_next: uid_next.ok_or(OpError::Backend(BackendError::Malformed))?,
            modseq: modseq.filter(|_| condstore),
            messages: messages.ok_or(OpError::Backend(BackendError::Malformed))?,
        };
        self.selected = Some(Selected {
            name: wire.to_owned(),
            writable: false,
            uid_validity: state.uid_validity,
        });
        Ok(state)
    }

    /// `UID FETCH <first>:<last or *> <items>` in the open folder, read to the end; answers
    /// outside the range are dropped (a server may volunteer flag changes, and `n:*` names the
    /// last message even when its UID is below `n`).
    async fn fetch_range(
        &mut self,
        first: u32,
        last: Option<u32>,
        items: &str,
    ) -> Result<Vec<Fetch>, OpError> {
        let set = match last {
            Some(last) => format!("{first}:{last}"),
            None => format!("{first}:*"),
        };
        let upper = last.unwrap_or(u32::MAX);
        self.fetch_set(&set, items, |u| (first..=upper).contains(&u))
            .await
    }
}

/// One page of the change feed of folder `wire` since `cursor`.
pub(crate) async fn folder_changes(
    conn: &mut Conn,
    wire: &str,
    cursor: Option<&str>,
    how: How,
) -> Result<FolderSync, OpError> {
    let cursor = match cursor {
        Some(text) => match Cursor::parse(text) {
            Some(c) => Some(c),
            // Not one of ours (another backend's, or damaged): start over.
            None => return Ok(reset()),
        },
        None => None,
    };
    let now = conn.examine_state(wire, how.condstore).await?;
    let Some(cursor) = cursor else {
        return inventory_page(conn, wire, now, 0, how.page).await;
    };
    if cursor.state.uid_validity != now.uid_validity {
        return Ok(reset());
    }
    if let Some(after) = cursor.after {
        return inventory_page(conn, wire, cursor.state, after, how.page).await;
    }
    match (cursor.state.modseq, now.modseq) {
        (Some(_), Some(_)) if cursor.state == now => Ok(FolderSync {
            delta: FolderDelta::Changes {
                changed: Vec::new(),
                removed: Vec::new(),
                present: None,
            },
            cursor: Some(cursor.encode()),
            more: false,
        }),
        // HIGHESTMODSEQ never goes down while UIDVALIDITY stays (RFC 7162 §3.1.2.1); a server
        // that breaks this gets the inventory rather than a delta that would miss changes.
        (Some(since), Some(highest)) if highest >= since => {
            changes_since(conn, wire, now, since).await
        }
        // Without mod-sequences a flag change leaves no trace in the state: list everything.
        _ => inventory_page(conn, wire, now, 0, how.page).await,
    }
}

/// Opens `wire` read-only; `None` when its UIDVALIDITY is no longer the one of `state` (the
/// folder was reset since its state was read).
async fn open_as(conn: &mut Conn, wire: &str, state: &State) -> Result<Option<u32>, OpError> {
    let uid_validity = conn.open(wire, false).await?;
    Ok((uid_validity == state.uid_validity).then_some(uid_validity))
}

fn item(wire: &str, uid_validity: u32, f: &Fetch) -> Option<SyncItem> {
    Some(SyncItem {
        id: MessageRef {
            folder: wire.to_owned(),
            uid_validity,
            uid: f.uid?,
        }
        .encode(),
        version: version(f),
    })
}

/// The inventory page of the UIDs after `after`, answered as of `state`.
async fn inventory_page(
    conn: &mut Conn,
    wire: &str,
    state: State,
    after: u32,
    page_size: usize,
) -> Result<FolderSync, OpError> {
    let Some(uid_validity) = open_as(conn, wire, &state).await? else {
        return Ok(reset());
    };
    let uids = conn.search(&Criteria::default()).await?;
    let page: Vec<u32> = uids
        .iter()
        .copied()
        .filter(|u| *u > after)
        .take(page_size.max(1))
        .collect();
    let (Some(&first), Some(&last)) = (page.first(), page.last()) else {
        return Ok(FolderSync {
            delta: FolderDelta::Inventory(Vec::new()),
            cursor: Some(Cursor { state, after: None }.encode()),
            more: false,
        });
    };
    let more = uids.iter().any(|u| *u > last);
    let items = if state.modseq.is_some() {
        "(UID FLAGS MODSEQ)"
    } else {
        "(UID FLAGS)"
    };
    let fetched = conn.fetch_range(first, Some(last), items).await?;
    Ok(FolderSync {
        delta: FolderDelta::Inventory(
            fetched
                .iter()
                .filter_map(|f| item(wire, uid_validity, f))
                .collect(),
        ),
        cursor: Some(
            Cursor {
                state,
                after: more.then_some(last),
            }
            .encode(),
        ),
        more,
    })
}

/// What changed in `wire` since mod-sequence `since`, and every id it holds now.
async fn changes_since(
    conn: &mut Conn,
    wire: &str,
    now: State,
    since: u64,
) -> Result<FolderSync, OpError> {
    let Some(uid_validity) = open_as(conn, wire, &now).await? else {
        return Ok(reset());
    };
    let fetched = conn
        .fetch_range(
            1,
            None,
            &format!("(UID FLAGS MODSEQ) (CHANGEDSINCE {since})"),
        )
        .await?;
    let present = conn.search(&Criteria::default()).await?;
    Ok(FolderSync {
        delta: FolderDelta::Changes {
            changed: fetched
                .iter()
                .filter_map(|f| item(wire, uid_validity, f))
                .collect(),
            removed: Vec::new(),
            present: Some(
                present
                    .into_iter()
                    .map(|uid| {
                        MessageRef {
                            folder: wire.to_owned(),
                            uid_validity,
                            uid,
                        }
                        .encode()
                    })
                    .collect(),
            ),
        },
        cursor: Some(
            Cursor {
                state: now,
                after: None,
            }
            .encode(),
        ),
        more: false,
    })
}

impl ImapStore {
    /// The index's read of `ids`: per folder, [`TEXT_BATCH`] messages per `UID FETCH` of the
    /// whole message (parsed once for the detail), then per message with picked attachments one
    /// `UID FETCH` of their sections; all on one connection for one rate-limit token (the
    /// default would take one per message and attachment, and an account's budget is 60 a
    /// minute). `BODY.PEEK` on an `EXAMINE`d folder: indexing never sets `\Seen`. What the
    /// deadline leaves unread is `Timeout`, for the caller to ask again.
    pub(super) async fn fetch_for_index(
        &self,
        ids: &[String],
        want: AttachmentWant,
    ) -> Vec<Result<IndexFetch, BackendError>> {
        let (groups, mut results) = match self.batch_start::<IndexFetch>(ids).await {
            Ok(started) => started,
            Err(refused) => return refused,
        };
        let deadline = Self::deadline();
        let outcome = with_conn!(self.pool, deadline, Repeat::Safe, |conn| {
            for (folder, items) in &groups {
                let Some((uid_validity, live)) =
                    open_current(conn, folder, items, &mut results).await?
                else {
                    continue;
                };
                for batch in live.chunks(TEXT_BATCH) {
                    if Instant::now() >= deadline {
                        break;
                    }
                    let mut uids: Vec<u32> = batch.iter().map(|(_, u)| *u).collect();
                    uids.sort_unstable();
                    uids.dedup();
                    let fetched = conn.fetch(&uids, &message_items()).await?;
                    for (i, uid) in batch {
                        let Some(f) = fetched.iter().find(|f| f.uid == Some(*uid)) else {
                            results[*i] = Some(Err(BackendError::NotFound));
                            continue;
                        };
                        let Some(detail) = detail(folder, uid_validity, f) else {
                            results[*i] = Some(Err(BackendError::Malformed));
                            continue;
                        };
                        let parts = f
                            .bodystructure()
                            .map(|s| structure::attachments(s).parts)
                            .unwrap_or_default();
                        let attachments = picked_attachments(conn, *uid, &parts, want).await?;
                        results[*i] = Some(Ok(IndexFetch {
                            detail,
                            attachments,
                        }));
                    }
                }
            }
            Ok(())
        });
        batch_end(results, &outcome)
    }
}

/// Every attachment of message `uid` (by its structure `parts`), with the decoded bytes of
/// those `want` picks, read in one `UID FETCH` of their sections. A part that cannot be read or
/// decodes beyond the cap has no bytes; only a connection failure fails the message.
async fn picked_attachments(
    conn: &mut Conn,
    uid: u32,
    parts: &[structure::PartInfo],
    want: AttachmentWant,
) -> Result<Vec<(AttachmentMeta, Option<Vec<u8>>)>, OpError> {
    let metas: Vec<AttachmentMeta> = parts.iter().map(|p| p.meta.clone()).collect();
    let picked = want.pick(&metas);
    let sections: Vec<String> = picked
        .iter()
        .filter(|i| section_path(&metas[**i].id).is_ok())
        .map(|i| format!("BODY.PEEK[{}]", metas[*i].id))
        .collect();
    let fetched = if sections.is_empty() {
        Vec::new()
    } else {
        match conn
            .fetch(&[uid], &format!("(UID {})", sections.join(" ")))
            .await
        {
            Ok(fetched) => fetched,
            Err(e) if e.is_broken() => return Err(e),
            // Refused (the message went away meanwhile): the detail stands without bytes.
            Err(_) => Vec::new(),
        }
    };
    Ok(parts
        .iter()
        .enumerate()
        .map(|(i, part)| {
            let bytes = picked
                .contains(&i)
                .then(|| {
                    let path = section_path(&part.meta.id).ok()?;
                    let raw = fetched
                        .first()?
                        .section(&imap_proto::SectionPath::Part(path, None))?;
                    let decoded = structure::decode_part(raw, part.encoding)?;
                    Some(structure::attachment_bytes(decoded, part))
                })
                .flatten()
                .filter(|b| b.len() as u64 <= want.max_bytes);
            (part.meta.clone(), bytes)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use futures::TryStreamExt as _;
    use proptest::prelude::*;
    use tokio::net::TcpStream;

    use super::super::ImapStore;
    use super::super::ids;
    use super::*;
    use crate::backends::MailStore as _;
    use crate::backends::model::{FolderSelector, WellKnown};

    #[test]
    fn cursors_round_trip_and_anything_else_is_refused() {
        let c = Cursor {
            state: State {
                uid_validity: 1_796_535_183,
                uid_next: 44,
                modseq: Some(90_060_115_205_545_359),
                messages: 40,
            },
            after: None,
        };
        assert_eq!(c.encode(), "imap1:1796535183:44:90060115205545359:40");
        assert_eq!(Cursor::parse(&c.encode()), Some(c));
        let paging = Cursor {
            state: State {
                modseq: None,
                ..c.state
            },
            after: Some(17),
        };
        assert_eq!(paging.encode(), "imap1:1796535183:44:-:40:17");
        assert_eq!(Cursor::parse(&paging.encode()), Some(paging));
        for bad in [
            "",
            "imap1:",
            "md1:1.0,2.0",
            "imap1:1:2:3",
            "imap1:1:2:3:4:5:6",
            "imap1:01:2:3:4",
            "imap1:1:2:x:4",
            "imap1:4294967296:2:3:4",
            "imap1:1:2:3:4:",
            "imap1:-1:2:3:4",
        ] {
            assert_eq!(Cursor::parse(bad), None, "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn any_cursor_is_refused_or_canonical(text in "(imap1:)?[0-9:x-]{0,40}") {
            if let Some(c) = Cursor::parse(&text) {
                prop_assert_eq!(c.encode(), text);
            }
        }
    }

    // ------------------------------------------------------------------------------------------
    // Against the loopback Dovecot of scripts/mailserver.sh.
    // ------------------------------------------------------------------------------------------

    /// The test Dovecot: `(imap port, domain, password)` from `scripts/mailserver.sh env`, or
    /// `None` after a loud SKIP line when it is not running (a failure instead where the IMAP
    /// tests are required: CI, or MAILGATE_IMAP_TESTS=require, as in tests/it/imap_server).
    #[expect(
        clippy::disallowed_methods,
        clippy::print_stderr,
        reason = "a test finds the test mail server by its script and says loudly when it skips"
    )]
    fn dovecot(test: &str) -> Option<(u16, String, String)> {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/mailserver.sh");
        let wanted = std::env::var("MAILGATE_IMAP_TESTS").unwrap_or_default();
        let required = std::env::var_os("CI").is_some_and(|v| !v.is_empty()) || wanted == "require";
        let running = !wanted.starts_with("skip")
            && std::process::Command::new(&script)
                .arg("running")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
        if !running {
            assert!(
                !required,
                "{test}: the IMAP tests must run here, but the test mail server is not running \
                 (scripts/mailserver.sh up)"
            );
            eprintln!(
                "!!! SKIP {test}: the test mail server is not running (scripts/mailserver.sh up)"
            );
            return None;
        }
        let out = std::process::Command::new(&script)
            .arg("env")
            .output()
            .expect("scripts/mailserver.sh env");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let var = |key: &str| {
            text.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{key}=")))
                .map(|v| v.trim_matches('"').to_owned())
                .unwrap_or_else(|| panic!("scripts/mailserver.sh env has no {key}: {text}"))
        };
        Some((
            var("MT_IMAP_PORT").parse().expect("port"),
            var("MT_DOMAIN"),
            var("MT_PASSWORD"),
        ))
    }

    /// A user no other test has (Dovecot creates its Maildir on first login).
    fn fresh_user(name: &str, domain: &str) -> String {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_nanos();
        format!("t-{name}-{}-{nanos}@{domain}", std::process::id())
    }

    fn store(port: u16, user: &str, password: &str) -> ImapStore {
        super::super::tests::plain_store(port, user, password)
    }

    /// The test's own session on the mailbox (not mailgate's), to deliver and change mail.
    async fn session(port: u16, user: &str, password: &str) -> async_imap::Session<TcpStream> {
        let tcp = TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        let mut client = async_imap::Client::new(tcp);
        client.read_response().await.expect("greeting");
        client
            .login(user, password)
            .await
            .map_err(|(e, _)| e)
            .expect("login")
    }

    async fn append(s: &mut async_imap::Session<TcpStream>, subject: &str) {
        let raw = format!(
            "From: ops@example.com\r\nTo: t@example.org\r\nSubject: {subject}\r\n\
             Message-ID: <{subject}@example.com>\r\n\r\nbody of {subject}\r\n"
        );
        s.append("INBOX", None, None, raw.as_bytes())
            .await
            .expect("APPEND");
    }

    async fn store_flags(s: &mut async_imap::Session<TcpStream>, uid: u32, change: &str) {
        let _: Vec<_> = s
            .uid_store(uid.to_string(), change)
            .await
            .expect("UID STORE")
            .try_collect()
            .await
            .expect("UID STORE answers");
    }

    fn id(uid_validity: u32, uid: u32) -> String {
        MessageRef {
            folder: "INBOX".to_owned(),
            uid_validity,
            uid,
        }
        .encode()
    }

    fn no_changes() -> FolderDelta {
        FolderDelta::Changes {
            changed: vec![],
            removed: vec![],
            present: None,
        }
    }

    fn inventory(sync: &FolderSync) -> &[SyncItem] {
        match &sync.delta {
            FolderDelta::Inventory(items) => items,
            other => panic!("an inventory, not {other:?}"),
        }
    }

    /// A cursor of the same folder state under another UIDVALIDITY.
    fn forged(cursor: &str) -> String {
        let mut c = Cursor::parse(cursor).expect("our cursor");
        c.state.uid_validity = c.state.uid_validity.wrapping_add(1);
        c.encode()
    }

    #[tokio::test]
    async fn condstore_feed_names_new_flagged_and_expunged_messages() {
        let Some((port, domain, password)) = dovecot("condstore_feed") else {
            return;
        };
        let user = fresh_user("changes-cs", &domain);
        let mut s = session(port, &user, &password).await;
        let caps = s.capabilities().await.expect("CAPABILITY");
        assert!(caps.has_str("CONDSTORE"), "Dovecot advertises CONDSTORE");
        for subject in ["one", "two", "three"] {
            append(&mut s, subject).await;
        }
        let store = store(port, &user, &password);

        let inbox = store
            .resolve_folder(&FolderSelector::WellKnown(WellKnown::Inbox))
            .await
            .expect("inbox");
        assert_eq!(inbox, ids::folder_id("INBOX"));
        assert_eq!(
            store
                .resolve_folder(&FolderSelector::Id(inbox.clone()))
                .await
                .expect("by id"),
            inbox
        );
        assert_eq!(
            store
                .resolve_folder(&FolderSelector::WellKnown(WellKnown::SentItems))
                .await
                .expect("sent"),
            ids::folder_id("Sent"),
            "the special-use Sent folder"
        );
        assert!(
            store
                .resolve_folder(&FolderSelector::Id(ids::folder_id("Nowhere")))
                .await
                .is_err()
        );

        let first = store.folder_changes(&inbox, None).await.expect("first");
        let cursor = first.cursor.clone().expect("a cursor");
        let state = Cursor::parse(&cursor).expect("ours").state;
        assert!(state.modseq.is_some(), "CONDSTORE in use: {cursor}");
        let v = state.uid_validity;
        assert!(!first.more);
        let listed: BTreeSet<String> = inventory(&first).iter().map(|i| i.id.clone()).collect();
        assert_eq!(listed, BTreeSet::from([id(v, 1), id(v, 2), id(v, 3)]));

        let quiet = store
            .folder_changes(&inbox, Some(&cursor))
            .await
            .expect("quiet");
        assert_eq!(quiet.delta, no_changes());
        assert_eq!(quiet.cursor.as_deref(), Some(cursor.as_str()));

        append(&mut s, "four").await;
        s.select("INBOX").await.expect("SELECT");
        store_flags(&mut s, 2, "+FLAGS (\\Flagged)").await;
        store_flags(&mut s, 3, "+FLAGS (\\Deleted)").await;
        let _: Vec<_> = s
            .expunge()
            .await
            .expect("EXPUNGE")
            .try_collect()
            .await
            .expect("EXPUNGE answers");

        let delta = store
            .folder_changes(&inbox, Some(&cursor))
            .await
            .expect("delta");
        let FolderDelta::Changes {
            changed,
            removed,
            present,
        } = &delta.delta
        else {
            panic!("changes since the cursor, not {delta:?}");
        };
        let changed_ids: BTreeSet<String> = changed.iter().map(|i| i.id.clone()).collect();
        assert_eq!(changed_ids, BTreeSet::from([id(v, 2), id(v, 4)]));
        let flagged = changed.iter().find(|i| i.id == id(v, 2)).expect("two");
        let before = inventory(&first)
            .iter()
            .find(|i| i.id == id(v, 2))
            .expect("two listed");
        assert!(flagged.version.contains("\\Flagged"), "{flagged:?}");
        assert_ne!(flagged.version, before.version);
        assert!(removed.is_empty());
        let present: BTreeSet<String> = present.clone().expect("present").into_iter().collect();
        assert_eq!(present, BTreeSet::from([id(v, 1), id(v, 2), id(v, 4)]));
        assert!(!delta.more);

        let next = delta.cursor.expect("next cursor");
        let quiet = store
            .folder_changes(&inbox, Some(&next))
            .await
            .expect("quiet again");
        assert_eq!(quiet.delta, no_changes());

        let reset = store
            .folder_changes(&inbox, Some(&forged(&next)))
            .await
            .expect("reset");
        assert_eq!(reset.delta, FolderDelta::Reset);
        assert_eq!(reset.cursor, None);
        let foreign = store
            .folder_changes(&inbox, Some("md1:1.0,2.0"))
            .await
            .expect("foreign cursor");
        assert_eq!(foreign.delta, FolderDelta::Reset);
        let _ = s.logout().await;
    }

    #[tokio::test]
    async fn without_condstore_every_sync_is_a_paged_inventory() {
        let Some((port, domain, password)) = dovecot("plain_feed") else {
            return;
        };
        let user = fresh_user("changes-plain", &domain);
        let mut s = session(port, &user, &password).await;
        for subject in ["one", "two", "three", "four", "five"] {
            append(&mut s, subject).await;
        }
        let store = store(port, &user, &password)
            .without_condstore()
            .with_inventory_page(2);
        let inbox = ids::folder_id("INBOX");

        // Three pages of two, two and one, resumed by cursor.
        let mut pages = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = store
                .folder_changes(&inbox, cursor.as_deref())
                .await
                .expect("page");
            cursor = page.cursor.clone();
            let more = page.more;
            pages.push(page);
            if !more {
                break;
            }
            assert!(pages.len() < 10, "paging ends");
        }
        let sizes: Vec<usize> = pages.iter().map(|p| inventory(p).len()).collect();
        assert_eq!(sizes, vec![2, 2, 1]);
        let cursor = cursor.expect("final cursor");
        let state = Cursor::parse(&cursor).expect("ours");
        assert_eq!((state.state.modseq, state.after), (None, None), "{cursor}");
        let v = state.state.uid_validity;
        let all: BTreeSet<String> = pages
            .iter()
            .flat_map(|p| inventory(p).iter().map(|i| i.id.clone()))
            .collect();
        assert_eq!(all, (1..=5).map(|u| id(v, u)).collect());
        assert!(
            pages
                .iter()
                .flat_map(inventory)
                .all(|i| !i.version.contains('#') && !i.version.contains("Recent")),
            "no MODSEQ in versions without CONDSTORE, no \\Recent ever"
        );

        // A flag change leaves no trace in the folder's state: the next sync lists everything again, and the
        // changed message's version differs.
        s.select("INBOX").await.expect("SELECT");
        store_flags(&mut s, 2, "+FLAGS (\\Flagged)").await;
        let store = store.with_inventory_page(100);
        let again = store
            .folder_changes(&inbox, Some(&cursor))
            .await
            .expect("again");
        let items = inventory(&again);
        assert_eq!(items.len(), 5);
        let two = items.iter().find(|i| i.id == id(v, 2)).expect("two");
        assert_eq!(two.version, "\\Flagged");
        let reset = store
            .folder_changes(&inbox, Some(&forged(&cursor)))
            .await
            .expect("reset");
        assert_eq!(reset.delta, FolderDelta::Reset);
        let _ = s.logout().await;
    }

    fn want_all(max_bytes: u64) -> AttachmentWant {
        fn any(_: &AttachmentMeta) -> bool {
            true
        }
        AttachmentWant {
            max_bytes,
            max_count: 4,
            wants: any,
        }
    }

    #[tokio::test]
    async fn index_fetch_reads_details_and_picked_attachments_without_setting_seen() {
        let Some((port, domain, password)) = dovecot("index_fetch") else {
            return;
        };
        let user = fresh_user("changes-fetch", &domain);
        let mut s = session(port, &user, &password).await;
        let multipart = "From: ops@example.com\r\nTo: t@example.org\r\nSubject: report\r\n\
            Message-ID: <report@example.com>\r\nMIME-Version: 1.0\r\n\
            Content-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n\
            --b1\r\nContent-Type: text/plain\r\n\r\nsee the notes\r\n\
            --b1\r\nContent-Type: text/plain; name=\"notes.txt\"\r\n\
            Content-Disposition: attachment; filename=\"notes.txt\"\r\n\
            Content-Transfer-Encoding: base64\r\n\r\n\
            cXVhcnRlcmx5IG51bWJlcnMgYXR0YWNoZWQ=\r\n--b1--\r\n";
        s.append("INBOX", None, None, multipart.as_bytes())
            .await
            .expect("APPEND");
        append(&mut s, "plain").await;
        let store = store(port, &user, &password);
        let inbox = ids::folder_id("INBOX");
        let first = store.folder_changes(&inbox, None).await.expect("list");
        let v = Cursor::parse(first.cursor.as_deref().expect("cursor"))
            .expect("ours")
            .state
            .uid_validity;
        let asked = [
            id(v, 1),
            id(v, 2),
            id(v.wrapping_add(1), 1),
            "not-an-id".to_owned(),
            id(v, 999),
        ];
        let items: Vec<SyncItem> = asked
            .iter()
            .map(|id| SyncItem {
                id: id.clone(),
                version: String::new(),
            })
            .collect();
        let got = store.index_fetch(&items, want_all(1 << 20)).await;
        assert_eq!(got.len(), asked.len());
        let report = got[0].as_ref().expect("the report");
        assert_eq!(report.detail.summary.id, asked[0]);
        assert_eq!(report.detail.summary.subject.as_deref(), Some("report"));
        assert!(report.detail.body_text.contains("see the notes"));
        assert_eq!(report.attachments.len(), 1, "{:?}", report.attachments);
        let (meta, bytes) = &report.attachments[0];
        assert_eq!(meta.name.as_deref(), Some("notes.txt"));
        assert_eq!(bytes.as_deref(), Some(&b"quarterly numbers attached"[..]));
        let plain = got[1].as_ref().expect("the plain one");
        assert_eq!(plain.detail.summary.subject.as_deref(), Some("plain"));
        assert!(plain.attachments.is_empty());
        assert!(
            matches!(got[2], Err(BackendError::Outdated)),
            "{:?}",
            got[2].as_ref().err()
        );
        assert!(matches!(got[3], Err(BackendError::BadId)));
        assert!(matches!(got[4], Err(BackendError::NotFound)));

        // Over the cap: listed, without bytes (not picked; a part whose decoded size beats its
        // estimate is also dropped after decoding).
        let capped = store.index_fetch(&items[..1], want_all(5)).await;
        let capped = capped[0].as_ref().expect("the report");
        assert_eq!(capped.attachments.len(), 1);
        assert_eq!(capped.attachments[0].1, None);

        // Reading for the index left both unread.
        let after = store.folder_changes(&inbox, None).await.expect("list");
        assert!(
            inventory(&after)
                .iter()
                .all(|i| !i.version.contains("Seen")),
            "{after:?}"
        );
        let _ = s.logout().await;
    }
}
