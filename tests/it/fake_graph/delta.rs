//! The fake's `GET /users/{u}/mailFolders/{f}/messages/delta`, per folder as Graph's is. A round
//! starts fresh (every message of the folder) or from a `$deltatoken` (what changed since the
//! round that issued it: new messages and messages whose `changeKey` moved, and `@removed`
//! entries for messages gone, reason `changed` when moved to another folder, `deleted` when
//! gone from the mailbox). A round's items are fixed when it starts and served
//! `Prefer: odata.maxpagesize` at a time (default 10, as Graph's), each page's nextLink
//! carrying a `$skiptoken`, the last page's deltaLink a `$deltatoken`. The links carry only the
//! token: the round's `$select` lives in it, as Graph encodes query options into its tokens.
//! Tokens are server state; [`FakeGraph::expire_delta_tokens`] drops the sync state of every
//! token handed out so far, after which they answer 410 `syncStateNotFound`.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use super::query::percent_encode;
use super::{Ctx, FakeGraph, Message, Reply, State, apply_select, graph_error};

/// Graph's page size for message delta when the client states none.
const DEFAULT_PAGE: usize = 10;

/// A round in progress (`$skiptoken`) or finished (`$deltatoken`).
#[derive(Clone, Debug)]
pub(crate) struct DeltaToken {
    address: String,
    folder_id: String,
    select: Option<Vec<String>>,
    /// The items still to serve (empty for a deltatoken).
    pending: Vec<Value>,
    /// The folder as the round saw it when it started: id → change counter.
    snapshot: BTreeMap<String, u32>,
    /// The expiry generation the token was issued in.
    generation: u64,
}

fn encode_token(kind: &str, n: u64) -> String {
    URL_SAFE_NO_PAD.encode(format!("{kind}:{n}"))
}

impl State {
    pub(super) fn delta(&mut self, address: &str, folder: &str, ctx: &Ctx<'_>, rid: u64) -> Reply {
        let Some(folder_id) = self.mailboxes[address].folder(folder).map(|f| f.id.clone()) else {
            return graph_error(
                404,
                "ErrorItemNotFound",
                &format!("The specified folder '{folder}' was not found in the store."),
                rid,
            );
        };
        let page_size = ctx.prefer.max_page_size.unwrap_or(DEFAULT_PAGE).max(1);
        let skip = ctx.param("$skiptoken").map(str::to_owned);
        let delta = ctx.param("$deltatoken").map(str::to_owned);
        let round = match (skip, delta) {
            (Some(_), Some(_)) => {
                return graph_error(400, "BadRequest", "Both tokens given.", rid);
            }
            (Some(token), None) => match self.live_token(&token, address, &folder_id, rid) {
                Ok(t) => t,
                Err(r) => return r,
            },
            (None, Some(token)) => {
                let since = match self.live_token(&token, address, &folder_id, rid) {
                    Ok(t) => t,
                    Err(r) => return r,
                };
                match self.changes_since(address, &folder_id, since, ctx, rid) {
                    Ok(t) => t,
                    Err(r) => return r,
                }
            }
            (None, None) => {
                let select = ctx.select();
                let msgs: Vec<&Message> = self.in_folder(address, &folder_id);
                let snapshot = msgs.iter().map(|m| (m.id.clone(), m.change)).collect();
                let pending = match render(&msgs, select.as_deref(), ctx, rid) {
                    Ok(v) => v,
                    Err(r) => return r,
                };
                DeltaToken {
                    address: address.to_owned(),
                    folder_id: folder_id.clone(),
                    select,
                    pending,
                    snapshot,
                    generation: self.delta_generation,
                }
            }
        };
        let mut rest = round;
        let value: Vec<Value> = rest
            .pending
            .drain(..page_size.min(rest.pending.len()))
            .collect();
        let n = self.next();
        let (key, token) = if rest.pending.is_empty() {
            (
                "@odata.deltaLink",
                ("$deltatoken", encode_token("delta", n)),
            )
        } else {
            ("@odata.nextLink", ("$skiptoken", encode_token("skip", n)))
        };
        self.delta_tokens.insert(token.1.clone(), rest);
        // Graph writes the `$` of the option name as is.
        let link = format!(
            "{}{}?{}={}",
            ctx.origin,
            ctx.raw_path,
            token.0,
            percent_encode(&token.1)
        );
        let mut body = json!({
            "@odata.context": format!(
                "{}/$metadata#Collection(message)",
                ctx.base(),
            ),
            "value": value,
        });
        body[key] = json!(link);
        Reply::json(200, &body)
    }

    /// The token's state if it is one of this folder's and its sync state is still kept.
    fn live_token(
        &self,
        token: &str,
        address: &str,
        folder_id: &str,
        rid: u64,
    ) -> Result<DeltaToken, Reply> {
        let Some(t) = self.delta_tokens.get(token) else {
            return Err(graph_error(
                400,
                "BadRequest",
                "The delta token is not valid.",
                rid,
            ));
        };
        if t.address != address || t.folder_id != folder_id {
            return Err(graph_error(
                400,
                "BadRequest",
                "The delta token belongs to another collection.",
                rid,
            ));
        }
        if t.generation < self.delta_generation {
            return Err(graph_error(
                410,
                "syncStateNotFound",
                "The sync state generation is not found.",
                rid,
            ));
        }
        Ok(t.clone())
    }

    fn in_folder(&self, address: &str, folder_id: &str) -> Vec<&Message> {
        self.mailboxes[address]
            .messages
            .iter()
            .filter(|m| m.folder_id == folder_id)
            .collect()
    }

    /// A new round holding what changed in the folder since `since`'s snapshot.
    fn changes_since(
        &self,
        address: &str,
        folder_id: &str,
        since: DeltaToken,
        ctx: &Ctx<'_>,
        rid: u64,
    ) -> Result<DeltaToken, Reply> {
        let now = self.in_folder(address, folder_id);
        let changed: Vec<&Message> = now
            .iter()
            .copied()
            .filter(|m| since.snapshot.get(&m.id) != Some(&m.change))
            .collect();
        let mut pending = render(&changed, since.select.as_deref(), ctx, rid)?;
        for id in since.snapshot.keys() {
            if now.iter().any(|m| &m.id == id) {
                continue;
            }
            let moved = self.mailboxes[address].messages.iter().any(|m| &m.id == id);
            let reason = if moved { "changed" } else { "deleted" };
            pending.push(json!({"id": id, "@removed": {"reason": reason}}));
        }
        Ok(DeltaToken {
            snapshot: now.iter().map(|m| (m.id.clone(), m.change)).collect(),
            pending,
            generation: self.delta_generation,
            ..since
        })
    }
}

/// The messages as delta items: the selected properties (Graph answers a delta with `$select`
/// plus `id`), else every property but the headers.
fn render(
    msgs: &[&Message],
    select: Option<&[String]>,
    ctx: &Ctx<'_>,
    rid: u64,
) -> Result<Vec<Value>, Reply> {
    msgs.iter()
        .map(|m| {
            let mut item = apply_select(
                m.json(ctx.prefer.body_as_text),
                select,
                &["internetMessageHeaders"],
            )
            .map_err(|bad| {
                graph_error(
                    400,
                    "RequestBroker--ParseUri",
                    &format!(
                        "Could not find a property named '{bad}' on type 'microsoft.graph.message'."
                    ),
                    rid,
                )
            })?;
            item.insert("@odata.type".into(), json!("#microsoft.graph.message"));
            Ok(Value::Object(item))
        })
        .collect()
}

impl FakeGraph {
    /// Drops the sync state behind every delta and skip token handed out so far: following
    /// one then answers 410 `syncStateNotFound`, as Graph does once a state has aged out.
    pub(crate) fn expire_delta_tokens(&self) {
        self.st().delta_generation += 1;
    }

    /// Deletes a message outright (no tool deletes; this is the mailbox's owner elsewhere).
    pub(crate) fn delete_message(&self, address: &str, id: &str) -> bool {
        let mut st = self.st();
        let Some(mb) = st.mailboxes.get_mut(&address.to_lowercase()) else {
            return false;
        };
        let before = mb.messages.len();
        mb.messages.retain(|m| m.id != id);
        mb.messages.len() != before
    }

    /// Changes a message as its owner would elsewhere (a flag, the body…); bumps its
    /// `changeKey` like any change.
    pub(crate) fn update_message(
        &self,
        address: &str,
        id: &str,
        change: impl FnOnce(&mut Message),
    ) {
        let mut st = self.st();
        if let Some(m) = st
            .mailboxes
            .get_mut(&address.to_lowercase())
            .and_then(|mb| mb.messages.iter_mut().find(|m| m.id == id))
        {
            change(m);
            m.change += 1;
        }
    }
}
