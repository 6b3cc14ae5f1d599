//! The Graph change feed for the local index: per-folder `messages/delta`. A sync without a
//! cursor starts a fresh round, whose pages list the whole folder ([`FolderDelta::Inventory`]);
//! the round's last page hands out a deltaLink, and a round started from it reports only what
//! changed ([`FolderDelta::Changes`]: new or changed messages, and ids gone from the folder,
//! moved or deleted). The cursor is the link to follow, tagged with the kind of round it
//! belongs to, since a nextLink does not say whether its round lists or reports changes. A
//! message's version is its `changeKey`, which Exchange changes on any change, flags included.
//! An expired sync state (410 Gone, `syncStateNotFound` and kin) is a [`FolderDelta::Reset`].
//! Cursors come back from disk and links from the server, so a link is followed only on the
//! configured Graph root (`Endpoints::next_link`): the token never goes anywhere else.

use super::super::BackendError;
use super::super::changes::{FolderDelta, FolderSync};
use super::GraphStore;
use super::client::{self, Refusal, Request};
use super::endpoints;
use super::wire::{self, DeltaLink};

/// Items per delta page (`Prefer: odata.maxpagesize`): Graph's default is 10, and a page of
/// ids and change keys is small, so fewer round trips win.
pub(crate) const DELTA_PAGE_SIZE: u32 = 200;

/// Cursor tag of a link within a fresh round: its pages list the whole folder.
const INVENTORY_TAG: &str = "i:";
/// Cursor tag of a link within a round started from a deltaLink: its pages list changes.
const CHANGES_TAG: &str = "d:";

/// Which kind of round a link belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Round {
    Inventory,
    Changes,
}

fn encode_cursor(round: Round, link: &str) -> String {
    let tag = match round {
        Round::Inventory => INVENTORY_TAG,
        Round::Changes => CHANGES_TAG,
    };
    format!("{tag}{link}")
}

/// The round and link of a cursor this module handed out; `Malformed` for anything else.
fn decode_cursor(cursor: &str) -> Result<(Round, &str), BackendError> {
    if let Some(link) = cursor.strip_prefix(INVENTORY_TAG) {
        Ok((Round::Inventory, link))
    } else if let Some(link) = cursor.strip_prefix(CHANGES_TAG) {
        Ok((Round::Changes, link))
    } else {
        Err(BackendError::Malformed)
    }
}

/// Whether Graph refused a delta link because its sync state is gone: the documented 410 Gone,
/// or an error code naming the sync state (`syncStateNotFound`, `syncStateInvalid`,
/// `resyncRequired`, …) whatever the status.
fn sync_state_lost(refusal: &Refusal) -> bool {
    refusal.status == reqwest::StatusCode::GONE
        || refusal
            .code
            .as_deref()
            .is_some_and(|c| c.starts_with("syncState") || c.starts_with("resync"))
}

impl GraphStore {
    /// One page of `folder_id`'s change feed since `cursor` (see the module docs).
    pub(super) async fn changes_of(
        &self,
        folder_id: &str,
        cursor: Option<&str>,
    ) -> Result<FolderSync, BackendError> {
        let (round, url) = match cursor {
            None => (
                Round::Inventory,
                Self::with_query(
                    self.url(&[
                        "mailFolders",
                        endpoints::segment(folder_id)?,
                        "messages",
                        "delta",
                    ]),
                    &[("$select", wire::DELTA_FIELDS)],
                ),
            ),
            Some(cursor) => {
                let (round, link) = decode_cursor(cursor)?;
                (round, self.client.endpoints().next_link(link)?)
            }
        };
        let mut req = Request::get(url);
        req.max_page_size = Some(DELTA_PAGE_SIZE);
        req.error_code = true;
        let body = match self
            .client
            .exchange_or_refusal(self.gate(), &req, Self::deadline())
            .await?
        {
            Ok(body) => body,
            // Only a link can expire; a fresh round refused so would ask again forever.
            Err(refusal) if cursor.is_some() && sync_state_lost(&refusal) => {
                return Ok(FolderSync {
                    delta: FolderDelta::Reset,
                    cursor: None,
                    more: false,
                });
            }
            Err(refusal) => return Err(client::classify(refusal.status)),
        };
        let page = wire::parse_delta_page(&body)?;
        // The link onward is checked now, not when it comes back: a page pointing off the
        // Graph root is refused before its cursor is stored.
        let (link, more) = match &page.link {
            DeltaLink::Next(l) => (l, true),
            DeltaLink::Delta(l) => (l, false),
        };
        self.client.endpoints().next_link(link)?;
        let next_round = match (round, more) {
            // A finished round's deltaLink starts a round of changes.
            (_, false) => Round::Changes,
            (round, true) => round,
        };
        let delta = match round {
            // A fresh round names no removals (whatever is not listed is gone).
            Round::Inventory => FolderDelta::Inventory(page.changed),
            Round::Changes => FolderDelta::Changes {
                changed: page.changed,
                removed: page.removed,
                present: None,
            },
        };
        Ok(FolderSync {
            delta,
            cursor: Some(encode_cursor(next_round, link)),
            more,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_keep_their_round_and_refuse_anything_else() {
        let link =
            "https://graph.microsoft.com/v1.0/users/a/mailFolders/x/messages/delta?$skiptoken=1";
        for round in [Round::Inventory, Round::Changes] {
            let cursor = encode_cursor(round, link);
            assert_eq!(decode_cursor(&cursor).expect("ours"), (round, link));
        }
        for bad in ["", link, "x:https://graph.microsoft.com/v1.0/", "md1:1,2"] {
            assert!(
                matches!(decode_cursor(bad), Err(BackendError::Malformed)),
                "{bad}"
            );
        }
    }

    #[test]
    fn lost_sync_state_is_a_gone_or_a_sync_state_code() {
        let refusal = |status: u16, code: Option<&str>| Refusal {
            status: reqwest::StatusCode::from_u16(status).expect("status"),
            code: code.map(str::to_owned),
        };
        assert!(sync_state_lost(&refusal(410, None)));
        assert!(sync_state_lost(&refusal(400, Some("syncStateNotFound"))));
        assert!(sync_state_lost(&refusal(400, Some("syncStateInvalid"))));
        assert!(sync_state_lost(&refusal(400, Some("resyncRequired"))));
        assert!(!sync_state_lost(&refusal(400, Some("BadRequest"))));
        assert!(!sync_state_lost(&refusal(404, Some("ErrorItemNotFound"))));
        assert!(!sync_state_lost(&refusal(500, None)));
    }
}
