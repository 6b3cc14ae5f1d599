//! The IMAP backend's writes (`MailWrite`): APPEND with the flags asked for, `UID MOVE` and
//! `UID COPY` answered with each message's new id from `COPYUID`, and `\Seen` changes. Folders are
//! opened with `SELECT` here and nowhere else; MOVE is never emulated with `\Deleted` +
//! `EXPUNGE`, and no operation deletes anything.

use super::ids::MessageRef;
use super::pool::{Conn, OpError, Repeat, with_conn};
use super::query::{Criteria, Key};
use super::{ImapStore, by_folder, live_uids, unsettled};
use crate::backends::model::{Flags, FolderSelector, ItemResult, WellKnown};
use crate::backends::{BackendError, MailWrite};
use crate::mime;

impl MailWrite for ImapStore {
    async fn append(
        &self,
        folder: WellKnown,
        raw: &[u8],
        flags: Flags,
    ) -> Result<String, BackendError> {
        self.admit().await?;
        let flag_list = [(flags.seen, "\\Seen"), (flags.draft, "\\Draft")]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, name)| *name)
            .collect::<Vec<_>>()
            .join(" ");
        with_conn!(self.pool, Self::deadline(), Repeat::Never, |conn| {
            let wire = self.ensure(conn, folder).await?;
            let placed = conn.append(&wire, &flag_list, raw).await?;
            let (uid_validity, uid) = match placed {
                Some(placed) => placed,
                None => self.find_by_message_id(conn, &wire, raw).await?,
            };
            Ok(MessageRef {
                folder: wire,
                uid_validity,
                uid,
            }
            .encode())
        })
    }

    async fn move_messages(
        &self,
        ids: &[String],
        destination: &FolderSelector,
    ) -> Result<Vec<ItemResult<String>>, BackendError> {
        self.relocate_all("MOVE", ids, destination).await
    }

    async fn copy_messages(
        &self,
        ids: &[String],
        destination: &FolderSelector,
    ) -> Result<Vec<ItemResult<String>>, BackendError> {
        self.relocate_all("COPY", ids, destination).await
    }

    async fn mark_messages(
        &self,
        ids: &[String],
        read: bool,
    ) -> Result<Vec<ItemResult<()>>, BackendError> {
        self.admit().await?;
        let (groups, refused) = by_folder(ids);
        with_conn!(self.pool, Self::deadline(), Repeat::Safe, |conn| {
            let mut results: Vec<ItemResult<()>> = unsettled(&refused);
            for (folder, items) in &groups {
                let uid_validity = match conn.open(folder, true).await {
                    Ok(v) => v,
                    Err(OpError::Backend(BackendError::NotFound)) => continue,
                    Err(e) => return Err(e),
                };
                let uids = live_uids(items, uid_validity, &mut results);
                if uids.is_empty() {
                    continue;
                }
                let changed = conn.store_seen(&uids, read).await?;
                for (i, m) in items {
                    if m.uid_validity == uid_validity && changed.contains(&m.uid) {
                        results[*i] = Ok(());
                    }
                }
            }
            Ok(results)
        })
    }
}

impl ImapStore {
    /// `UID MOVE` or `UID COPY` of `ids` to an existing folder, one command per source folder,
    /// answering each message's new id from the server's `COPYUID`. Without MOVE the whole call
    /// is `Unsupported` (never `\Deleted` + `EXPUNGE`); without UIDPLUS the new ids cannot be
    /// known, so it is refused before anything moves.
    async fn relocate_all(
        &self,
        verb: &'static str,
        ids: &[String],
        destination: &FolderSelector,
    ) -> Result<Vec<ItemResult<String>>, BackendError> {
        self.admit().await?;
        let (groups, refused) = by_folder(ids);
        with_conn!(self.pool, Self::deadline(), Repeat::Never, |conn| {
            if verb == "MOVE" && !conn.caps.r#move {
                return Err(OpError::Backend(BackendError::ServerLacks(
                    "MOVE (RFC 6851)",
                )));
            }
            if !conn.caps.uidplus {
                return Err(OpError::Backend(BackendError::ServerLacks(
                    "UIDPLUS (RFC 4315)",
                )));
            }
            let target = self.existing(conn, destination).await?;
            let mut results: Vec<ItemResult<String>> = unsettled(&refused);
            for (folder, items) in &groups {
                let uid_validity = match conn.open(folder, verb == "MOVE").await {
                    Ok(v) => v,
                    Err(OpError::Backend(BackendError::NotFound)) => continue,
                    Err(e) => return Err(e),
                };
                let uids = live_uids(items, uid_validity, &mut results);
                if uids.is_empty() {
                    continue;
                }
                let Some((target_validity, pairs)) = conn.relocate(verb, &uids, &target).await?
                else {
                    // Done, but the server did not say where: the ids cannot be given.
                    for (i, _) in items {
                        results[*i] = Err(BackendError::Malformed);
                    }
                    continue;
                };
                for (i, m) in items {
                    if m.uid_validity != uid_validity {
                        continue;
                    }
                    if let Some((_, new_uid)) = pairs.iter().find(|(src, _)| *src == m.uid) {
                        results[*i] = Ok(MessageRef {
                            folder: target.clone(),
                            uid_validity: target_validity,
                            uid: *new_uid,
                        }
                        .encode());
                    }
                }
            }
            Ok(results)
        })
    }

    /// The `(uidvalidity, uid)` of the message just appended to `wire`, found by its
    /// Message-ID (a server without UIDPLUS does not say).
    async fn find_by_message_id(
        &self,
        conn: &mut Conn,
        wire: &str,
        raw: &[u8],
    ) -> Result<(u32, u32), OpError> {
        let message_id = mime::parse(raw)
            .message_id
            .ok_or(OpError::Backend(BackendError::Malformed))?;
        let uid_validity = conn.open(wire, false).await?;
        let uids = conn
            .search(&Criteria {
                keys: vec![Key::MessageId(format!("<{message_id}>"))],
            })
            .await?;
        let uid = uids
            .last()
            .copied()
            .ok_or(OpError::Backend(BackendError::Malformed))?;
        Ok((uid_validity, uid))
    }
}
