//! The Graph v1.0 handlers of the fake: folders, listing, search, messages, attachments and
//! the writes (move, copy, patch, MIME draft, sendMail), over the shared state.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use chrono::Utc;
use serde_json::{Value, json};

use super::query::{self, Clause, percent_encode};
use super::store::{WELL_KNOWN, id_is_well_formed, opaque_id};
use super::{
    Attachment, AttachmentContent, Ctx, EmailAddress, Folder, Incoming, MAX_TOP, Mailbox, Message,
    Reply, Route, SEARCH_CAP, SentMail, State, apply_select, graph_error,
};

/// Graph's documented limit on the steps of one JSON batch.
pub(crate) const BATCH_MAX: usize = 20;

impl State {
    /// `POST /v1.0/$batch`: runs each step through the router in order (faults and recording
    /// apply per step; steps inherit the batch's `Authorization`), answers `{"responses": […]}`
    /// with JSON bodies inline and other bodies base64, as Graph does.
    pub(super) fn batch(&mut self, inc: &Incoming, rid: u64) -> Reply {
        let bad = |msg: &str| graph_error(400, "BadRequest", msg, rid);
        let Ok(payload) = serde_json::from_slice::<Value>(&inc.body) else {
            return bad("Invalid batch payload format.");
        };
        let Some(steps) = payload["requests"].as_array() else {
            return bad("Invalid batch payload format: no requests.");
        };
        if steps.len() > BATCH_MAX {
            return bad("Number of batch request steps exceeds the maximum of 20.");
        }
        let mut seen = std::collections::BTreeSet::new();
        for step in steps {
            let id = step["id"].as_str().unwrap_or("");
            if id.is_empty() || !seen.insert(id.to_owned()) {
                return bad("Every batch step needs a unique id.");
            }
            if step["method"].as_str().is_none() || step["url"].as_str().is_none() {
                return bad("Every batch step needs a method and a url.");
            }
        }
        let outer_auth: Vec<(String, String)> = inc
            .headers
            .iter()
            .filter(|(k, _)| k == "authorization")
            .cloned()
            .collect();
        let mut responses = Vec::new();
        let mut delay = None::<std::time::Duration>;
        for step in steps {
            let url = step["url"].as_str().unwrap_or("").trim_start_matches('/');
            let (path, query) = match url.split_once('?') {
                Some((p, q)) => (p, Some(q.to_owned())),
                None => (url, None),
            };
            let mut headers = outer_auth.clone();
            if let Some(h) = step["headers"].as_object() {
                for (k, v) in h {
                    headers.push((k.to_ascii_lowercase(), v.as_str().unwrap_or("").to_owned()));
                }
            }
            let body = match &step["body"] {
                Value::Null => Vec::new(),
                Value::String(text) => text.clone().into_bytes(),
                other => serde_json::to_vec(other).unwrap_or_default(),
            };
            let sub = Incoming {
                method: step["method"]
                    .as_str()
                    .unwrap_or("GET")
                    .to_ascii_uppercase(),
                raw_path: format!("/v1.0/{path}"),
                raw_query: query,
                headers,
                body,
            };
            let reply = self.dispatch(&sub, false);
            delay = delay.max(reply.delay);
            let mut headers = serde_json::Map::new();
            if !reply.content_type.is_empty() {
                headers.insert("Content-Type".into(), json!(reply.content_type));
            }
            for (k, v) in &reply.headers {
                headers.insert(k.clone(), json!(v));
            }
            let mut one = json!({"id": step["id"], "status": reply.status, "headers": headers});
            if !reply.body.is_empty() {
                one["body"] = match serde_json::from_slice::<Value>(&reply.body) {
                    Ok(v) if reply.content_type.starts_with("application/json") => v,
                    _ => json!(STANDARD.encode(&reply.body)),
                };
            }
            responses.push(one);
        }
        let mut reply = Reply::json(200, &json!({"responses": responses}));
        reply.delay = delay;
        reply
    }

    pub(super) fn graph(
        &mut self,
        route: Route,
        method: &str,
        segs: &[String],
        ctx: &Ctx<'_>,
        rid: u64,
    ) -> Reply {
        if segs.first().map(String::as_str) != Some("v1.0")
            || segs.get(1).map(String::as_str) != Some("users")
            || route == Route::Unknown
        {
            let what = segs.last().cloned().unwrap_or_default();
            return graph_error(
                400,
                "BadRequest",
                &format!("Resource not found for the segment '{what}' ({method})."),
                rid,
            );
        }
        let address = segs[2].to_lowercase();
        if !self.mailboxes.contains_key(&address) {
            return graph_error(
                404,
                "ErrorInvalidUser",
                &format!("The requested user '{}' is invalid.", segs[2]),
                rid,
            );
        }
        if let Some(scope) = &self.app_scope
            && !scope.contains(&address)
        {
            // Exchange RBAC for Applications: the app is confined to its management scope.
            return access_denied(rid);
        }
        if let (Some(granted), Some(needed)) = (&self.granted, route.permission())
            && !granted.contains(needed)
            && !(needed == "Mail.Read" && granted.contains("Mail.ReadWrite"))
        {
            return access_denied(rid);
        }
        let rest = &segs[3..];
        match route {
            Route::Folders => self.folders(&address, rest, ctx, rid),
            Route::List | Route::Search => {
                let folder = (rest.first().map(String::as_str) == Some("mailFolders"))
                    .then(|| rest[1].clone());
                if route == Route::Search {
                    self.search(&address, folder.as_deref(), ctx, rid)
                } else {
                    self.list(&address, folder.as_deref(), ctx, rid)
                }
            }
            Route::Message => self.get_message(&address, &rest[1], ctx, rid),
            Route::Attachments => self.attachments(
                &address,
                &rest[1],
                rest.get(3).map(String::as_str),
                ctx,
                rid,
            ),
            Route::AttachmentValue => self.attachment_value(&address, &rest[1], &rest[3], rid),
            Route::Move | Route::Copy => {
                self.move_or_copy(&address, &rest[1], route == Route::Copy, ctx, rid)
            }
            Route::Patch => self.patch(&address, &rest[1], ctx, rid),
            Route::Draft => self.draft(&address, ctx, rid),
            Route::Send => self.send(&address, ctx, rid),
            Route::Delta => self.delta(&address, &rest[1], ctx, rid),
            Route::Categories => {
                let value: Vec<Value> = self.mailboxes[&address]
                    .categories
                    .iter()
                    .map(|c| json!({ "id": c, "displayName": c, "color": "preset0" }))
                    .collect();
                Reply::json(200, &json!({ "value": value }))
            }
            Route::Contacts | Route::People => {
                let top: usize = ctx.param("$top").and_then(|t| t.parse().ok()).unwrap_or(10);
                // People search matches the quoted phrase in the name or address.
                let phrase = ctx
                    .param("$search")
                    .map(|q| q.trim_matches('"').to_lowercase());
                let value: Vec<Value> = self.mailboxes[&address]
                    .contacts
                    .iter()
                    .filter(|(name, addr)| {
                        phrase.as_ref().is_none_or(|p| {
                            name.to_lowercase().contains(p) || addr.to_lowercase().contains(p)
                        })
                    })
                    .take(top)
                    .map(|(name, addr)| {
                        if route == Route::People {
                            json!({ "displayName": name, "scoredEmailAddresses": [{ "address": addr, "relevanceScore": 1.0 }] })
                        } else {
                            json!({ "displayName": name, "emailAddresses": [{ "name": name, "address": addr }] })
                        }
                    })
                    .collect();
                Reply::json(200, &json!({ "value": value }))
            }
            Route::Token | Route::Batch | Route::Unknown => {
                graph_error(400, "BadRequest", "Bad route.", rid)
            }
        }
    }

    fn folders(&self, address: &str, rest: &[String], ctx: &Ctx<'_>, rid: u64) -> Reply {
        let mb = &self.mailboxes[address];
        let select = ctx.select();
        let render = |f: &Folder| -> Result<Value, Reply> {
            apply_select(mb.folder_json(f), select.as_deref(), &[])
                .map(Value::Object)
                .map_err(|bad| {
                    graph_error(
                        400,
                        "RequestBroker--ParseUri",
                        &format!("Could not find a property named '{bad}' on type 'microsoft.graph.mailFolder'."),
                        rid,
                    )
                })
        };
        // One folder: GET mailFolders/{id-or-well-known}.
        if rest.len() == 2 {
            let Some(f) = mb.folder(&rest[1]) else {
                return folder_not_found(&rest[1], rid);
            };
            return match render(f) {
                Ok(mut v) => {
                    v["@odata.context"] = json!(format!(
                        "{}/$metadata#users('{}')/mailFolders/$entity",
                        ctx.base(),
                        percent_encode(address)
                    ));
                    Reply::json(200, &v)
                }
                Err(r) => r,
            };
        }
        let parent = if rest.len() == 3 {
            match mb.folder(&rest[1]) {
                Some(f) => f.id.clone(),
                None => return folder_not_found(&rest[1], rid),
            }
        } else {
            mb.root_id.clone()
        };
        let include_hidden = ctx.param("includeHiddenFolders") == Some("true");
        let all: Vec<&Folder> = mb
            .folders
            .iter()
            .filter(|f| f.parent_id == parent && (include_hidden || !f.is_hidden))
            .collect();
        let (top, skip) = match paging(ctx, 10, rid) {
            Ok(p) => p,
            Err(r) => return r,
        };
        let mut value = Vec::new();
        for f in all.iter().skip(skip).take(top) {
            match render(f) {
                Ok(v) => value.push(v),
                Err(r) => return r,
            }
        }
        let more = (skip + top < all.len()).then(|| ("$skip", (skip + top).to_string()));
        paged(ctx, address, "mailFolders", value, more)
    }

    fn scope<'m>(
        &'m self,
        address: &str,
        folder: Option<&str>,
        rid: u64,
    ) -> Result<Vec<&'m Message>, Reply> {
        let mb = &self.mailboxes[address];
        match folder {
            None => Ok(mb.messages.iter().collect()),
            Some(key) => {
                let Some(f) = mb.folder(key) else {
                    return Err(folder_not_found(key, rid));
                };
                Ok(mb.messages.iter().filter(|m| m.folder_id == f.id).collect())
            }
        }
    }

    fn render_messages(
        &self,
        msgs: &[&Message],
        ctx: &Ctx<'_>,
        rid: u64,
    ) -> Result<Vec<Value>, Reply> {
        let select = ctx.select();
        msgs.iter()
            .map(|m| {
                apply_select(
                    m.json(ctx.prefer.body_as_text),
                    select.as_deref(),
                    &["internetMessageHeaders"],
                )
                .map(Value::Object)
                .map_err(|bad| {
                    graph_error(
                        400,
                        "RequestBroker--ParseUri",
                        &format!("Could not find a property named '{bad}' on type 'microsoft.graph.message'."),
                        rid,
                    )
                })
            })
            .collect()
    }

    fn list(&self, address: &str, folder: Option<&str>, ctx: &Ctx<'_>, rid: u64) -> Reply {
        let (top, skip) = match paging(ctx, 10, rid) {
            Ok(p) => p,
            Err(r) => return r,
        };
        let clauses = match ctx.param("$filter") {
            None => Vec::new(),
            Some(f) => match query::parse_filter(f) {
                Some(c) => c,
                None => {
                    return graph_error(
                        400,
                        "ErrorInvalidUrlQueryFilter",
                        "The query filter contains one or more invalid nodes.",
                        rid,
                    );
                }
            },
        };
        let order = match ctx.param("$orderby") {
            None => None,
            Some(o) => match query::parse_orderby(o) {
                Some(keys) => Some(keys),
                None => {
                    return graph_error(
                        400,
                        "BadRequest",
                        &format!("Invalid $orderby expression '{o}'."),
                        rid,
                    );
                }
            },
        };
        if let Some(order) = &order
            && !clauses.is_empty()
            && !query::orderby_fits_filter(order, &clauses)
        {
            return graph_error(
                400,
                "InefficientFilter",
                "The restriction or sort order is too complex for this operation.",
                rid,
            );
        }
        let mut msgs = match self.scope(address, folder, rid) {
            Ok(m) => m,
            Err(r) => return r,
        };
        msgs.retain(|m| {
            clauses.iter().all(|c| match c {
                Clause::ReceivedGe(t) => m.received >= *t,
                Clause::ReceivedLe(t) => m.received <= *t,
                Clause::IsRead(b) => m.is_read == *b,
                Clause::HasAttachments(b) => m.has_attachments() == *b,
            })
        });
        let keys = order.unwrap_or_else(|| {
            vec![query::OrderKey {
                property: "receivedDateTime".into(),
                descending: true,
            }]
        });
        msgs.sort_by(|a, b| {
            for k in &keys {
                let o = match k.property.as_str() {
                    "sentDateTime" => a.sent.cmp(&b.sent),
                    "isRead" => a.is_read.cmp(&b.is_read),
                    "hasAttachments" => a.has_attachments().cmp(&b.has_attachments()),
                    _ => a.received.cmp(&b.received),
                };
                let o = if k.descending { o.reverse() } else { o };
                if o.is_ne() {
                    return o;
                }
            }
            std::cmp::Ordering::Equal
        });
        let page: Vec<&Message> = msgs.iter().skip(skip).take(top).copied().collect();
        let value = match self.render_messages(&page, ctx, rid) {
            Ok(v) => v,
            Err(r) => return r,
        };
        let more = (skip + top < msgs.len()).then(|| ("$skip", (skip + top).to_string()));
        paged(ctx, address, "messages", value, more)
    }

    fn search(&self, address: &str, folder: Option<&str>, ctx: &Ctx<'_>, rid: u64) -> Reply {
        if ctx.param("$filter").is_some() || ctx.param("$orderby").is_some() {
            return graph_error(
                400,
                "ErrorInvalidUrlQuery",
                "The query parameter '$search' cannot be combined with '$filter' or '$orderby'.",
                rid,
            );
        }
        if ctx.param("$skip").is_some() {
            return graph_error(
                400,
                "ErrorInvalidUrlQuery",
                "The query parameter '$skip' is not supported with '$search'; use the nextLink.",
                rid,
            );
        }
        let raw = ctx.param("$search").unwrap_or("");
        let Some(terms) = query::parse_search(raw) else {
            return graph_error(
                400,
                "BadRequest",
                &format!(
                    "Syntax error: character '{}' is not valid at position 0 in '{raw}'.",
                    raw.chars().next().unwrap_or(' ')
                ),
                rid,
            );
        };
        let (top, _) = match paging(ctx, 10, rid) {
            Ok(p) => p,
            Err(r) => return r,
        };
        let offset = match ctx.param("$skiptoken") {
            None => 0,
            Some(t) => match decode_skiptoken(t) {
                Some(o) => o,
                None => {
                    return graph_error(400, "ErrorInvalidUrlQuery", "Invalid $skiptoken.", rid);
                }
            },
        };
        let mut msgs = match self.scope(address, folder, rid) {
            Ok(m) => m,
            Err(r) => return r,
        };
        if !self.ignore_search.contains(address) {
            msgs.retain(|m| m.haystack().matches(&terms));
        }
        msgs.sort_by_key(|m| std::cmp::Reverse(m.sent));
        msgs.truncate(SEARCH_CAP);
        let page: Vec<&Message> = msgs.iter().skip(offset).take(top).copied().collect();
        let value = match self.render_messages(&page, ctx, rid) {
            Ok(v) => v,
            Err(r) => return r,
        };
        let more =
            (offset + top < msgs.len()).then(|| ("$skiptoken", encode_skiptoken(offset + top)));
        paged(ctx, address, "messages", value, more)
    }

    fn find(&self, address: &str, id: &str, rid: u64) -> Result<usize, Reply> {
        if !id_is_well_formed(id) {
            return Err(graph_error(
                400,
                "ErrorInvalidIdMalformed",
                "Id is malformed.",
                rid,
            ));
        }
        self.mailboxes[address]
            .messages
            .iter()
            .position(|m| m.id == id)
            .ok_or_else(|| {
                graph_error(
                    404,
                    "ErrorItemNotFound",
                    "The specified object was not found in the store.",
                    rid,
                )
            })
    }

    fn one_message(
        &self,
        address: &str,
        idx: usize,
        ctx: &Ctx<'_>,
        status: u16,
        rid: u64,
    ) -> Reply {
        let m = &self.mailboxes[address].messages[idx];
        match self.render_messages(&[m], ctx, rid) {
            Ok(mut v) => {
                let mut one = v.remove(0);
                one["@odata.context"] = json!(format!(
                    "{}/$metadata#users('{}')/messages/$entity",
                    ctx.base(),
                    percent_encode(address)
                ));
                Reply::json(status, &one)
            }
            Err(r) => r,
        }
    }

    fn get_message(&self, address: &str, id: &str, ctx: &Ctx<'_>, rid: u64) -> Reply {
        match self.find(address, id, rid) {
            Ok(idx) => self.one_message(address, idx, ctx, 200, rid),
            Err(r) => r,
        }
    }

    fn attachments(
        &self,
        address: &str,
        id: &str,
        one: Option<&str>,
        ctx: &Ctx<'_>,
        rid: u64,
    ) -> Reply {
        let idx = match self.find(address, id, rid) {
            Ok(i) => i,
            Err(r) => return r,
        };
        let m = &self.mailboxes[address].messages[idx];
        let select = ctx.select();
        // `$expand=microsoft.graph.itemattachment/item` inlines an attached message's JSON.
        let expand_item = ctx
            .param("$expand")
            .is_some_and(|e| e.to_ascii_lowercase().contains("itemattachment/item"));
        let render = |a: &Attachment| {
            let mut json = a.json(m.received);
            if let (true, AttachmentContent::Item { message, .. }) = (expand_item, &a.content) {
                let mut item = message.json(ctx.prefer.body_as_text);
                item.remove("internetMessageHeaders");
                item.insert("@odata.type".into(), json!("#microsoft.graph.message"));
                json.insert("item".into(), Value::Object(item));
            }
            apply_select(json, select.as_deref(), &[])
                .map(Value::Object)
                .map_err(|bad| {
                    graph_error(
                        400,
                        "RequestBroker--ParseUri",
                        &format!("Could not find a property named '{bad}' on type 'microsoft.graph.attachment'."),
                        rid,
                    )
                })
        };
        if let Some(aid) = one {
            let Some(a) = m.attachments.iter().find(|a| a.id == aid) else {
                return graph_error(
                    404,
                    "ErrorItemNotFound",
                    "The attachment was not found.",
                    rid,
                );
            };
            return match render(a) {
                Ok(v) => Reply::json(200, &v),
                Err(r) => r,
            };
        }
        let mut value = Vec::new();
        for a in &m.attachments {
            match render(a) {
                Ok(v) => value.push(v),
                Err(r) => return r,
            }
        }
        Reply::json(
            200,
            &json!({
                "@odata.context": format!("{}/$metadata#users('{}')/messages('{}')/attachments", ctx.base(), percent_encode(address), id),
                "value": value,
            }),
        )
    }

    fn attachment_value(&self, address: &str, id: &str, aid: &str, rid: u64) -> Reply {
        let idx = match self.find(address, id, rid) {
            Ok(i) => i,
            Err(r) => return r,
        };
        let m = &self.mailboxes[address].messages[idx];
        let Some(a) = m.attachments.iter().find(|a| a.id == aid) else {
            return graph_error(
                404,
                "ErrorItemNotFound",
                "The attachment was not found.",
                rid,
            );
        };
        match &a.content {
            AttachmentContent::File(bytes) => Reply::bytes(200, bytes.clone(), &a.content_type),
            AttachmentContent::Item { mime, .. } => {
                Reply::bytes(200, mime.clone(), "message/rfc822")
            }
            AttachmentContent::Reference { .. } => graph_error(
                400,
                "ErrorInvalidRequest",
                "The $value of a reference attachment is not supported.",
                rid,
            ),
        }
    }

    fn move_or_copy(
        &mut self,
        address: &str,
        id: &str,
        copy: bool,
        ctx: &Ctx<'_>,
        rid: u64,
    ) -> Reply {
        let idx = match self.find(address, id, rid) {
            Ok(i) => i,
            Err(r) => return r,
        };
        let dest = serde_json::from_slice::<Value>(ctx.body)
            .ok()
            .and_then(|v| v["destinationId"].as_str().map(str::to_owned));
        let Some(dest) = dest else {
            return graph_error(
                400,
                "ErrorInvalidRequest",
                "The request body must be JSON with a destinationId.",
                rid,
            );
        };
        let Some(dest_id) = self.mailboxes[address].folder(&dest).map(|f| f.id.clone()) else {
            return folder_not_found(&dest, rid);
        };
        let n = self.next();
        let mut att_ids = Vec::new();
        if copy {
            for _ in 0..self.mailboxes[address].messages[idx].attachments.len() {
                let k = self.next();
                att_ids.push(opaque_id("AAMkAGAT", k));
            }
        }
        let mb = self.mailboxes.get_mut(address).unwrap();
        let new_idx = if copy {
            let mut c = mb.messages[idx].clone();
            c.id = opaque_id("AAMkAG", n);
            c.folder_id = dest_id;
            c.change = 1;
            for (a, aid) in c.attachments.iter_mut().zip(att_ids) {
                a.id = aid;
            }
            mb.messages.push(c);
            mb.messages.len() - 1
        } else {
            let m = &mut mb.messages[idx];
            m.folder_id = dest_id;
            m.change += 1;
            if !ctx.prefer.immutable_ids {
                // Graph's default ids encode the folder: a move hands out a new one.
                m.id = opaque_id("AAMkAG", n);
            }
            idx
        };
        self.one_message(address, new_idx, ctx, 201, rid)
    }

    fn patch(&mut self, address: &str, id: &str, ctx: &Ctx<'_>, rid: u64) -> Reply {
        let idx = match self.find(address, id, rid) {
            Ok(i) => i,
            Err(r) => return r,
        };
        let Some(obj) = serde_json::from_slice::<Value>(ctx.body)
            .ok()
            .and_then(|v| v.as_object().cloned())
        else {
            return graph_error(
                400,
                "ErrorInvalidRequest",
                "The request body must be a JSON object.",
                rid,
            );
        };
        let mut is_read = None;
        let mut flagged = None;
        for (k, v) in &obj {
            match (k.as_str(), v) {
                ("isRead", Value::Bool(b)) => is_read = Some(*b),
                ("flag", Value::Object(f)) => match f.get("flagStatus").and_then(Value::as_str) {
                    Some("flagged") => flagged = Some(true),
                    Some("notFlagged" | "complete") => flagged = Some(false),
                    _ => {
                        return graph_error(
                            400,
                            "ErrorInvalidProperty",
                            "Invalid flagStatus.",
                            rid,
                        );
                    }
                },
                _ => {
                    return graph_error(
                        400,
                        "ErrorInvalidProperty",
                        &format!(
                            "The property '{k}' cannot be updated by the fake (or is invalid)."
                        ),
                        rid,
                    );
                }
            }
        }
        let m = &mut self.mailboxes.get_mut(address).unwrap().messages[idx];
        if let Some(b) = is_read {
            m.is_read = b;
        }
        if let Some(f) = flagged {
            m.flagged = f;
        }
        m.change += 1;
        self.one_message(address, idx, ctx, 200, rid)
    }

    /// Decodes a base64 MIME body (`Content-Type: text/plain`), as draft and sendMail take it.
    fn mime_body(ctx: &Ctx<'_>, rid: u64) -> Result<(Vec<u8>, Message), Reply> {
        if !ctx.content_type.starts_with("text/plain") {
            return Err(graph_error(
                400,
                "ErrorInvalidRequest",
                "The fake Graph takes messages in MIME format only (Content-Type: text/plain, base64).",
                rid,
            ));
        }
        let text: String = String::from_utf8_lossy(ctx.body)
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let mime = STANDARD.decode(text.as_bytes()).map_err(|_| {
            graph_error(
                400,
                "ErrorMimeContentInvalidBase64String",
                "Invalid base64 string for MIME content.",
                rid,
            )
        })?;
        let msg = Message::from_eml(&mime).ok_or_else(|| {
            graph_error(
                400,
                "ErrorMimeContentInvalid",
                "The MIME content is invalid.",
                rid,
            )
        })?;
        Ok((mime, msg))
    }

    fn draft(&mut self, address: &str, ctx: &Ctx<'_>, rid: u64) -> Reply {
        let (_, mut msg) = match Self::mime_body(ctx, rid) {
            Ok(x) => x,
            Err(r) => return r,
        };
        stamp_own(&mut msg, address, true);
        let id = self.file(address, "drafts", msg);
        let idx = self.mailboxes[address]
            .messages
            .iter()
            .position(|m| m.id == id)
            .unwrap();
        self.one_message(address, idx, ctx, 201, rid)
    }

    fn send(&mut self, address: &str, ctx: &Ctx<'_>, rid: u64) -> Reply {
        let (mime, mut msg) = match Self::mime_body(ctx, rid) {
            Ok(x) => x,
            Err(r) => return r,
        };
        if msg.to.is_empty() && msg.cc.is_empty() && msg.bcc.is_empty() {
            return graph_error(
                400,
                "ErrorInvalidRecipients",
                "At least one recipient isn't valid.",
                rid,
            );
        }
        let addrs = |v: &[EmailAddress]| v.iter().map(|a| a.address.clone()).collect::<Vec<_>>();
        let in_reply_to = msg
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("In-Reply-To"))
            .map(|(_, v)| v.clone());
        self.sent.push(SentMail {
            mailbox: address.to_owned(),
            from: msg.from.as_ref().map(|a| a.address.clone()),
            to: addrs(&msg.to),
            cc: addrs(&msg.cc),
            bcc: addrs(&msg.bcc),
            subject: msg.subject.clone(),
            in_reply_to,
            mime,
        });
        // Graph files the sent message in Sent Items itself (saveToSentItems defaults to true).
        stamp_own(&mut msg, address, false);
        self.file(address, "sentitems", msg);
        Reply::empty(202)
    }

    /// Files `msg` in the folder `key` (id or well-known) and assigns its ids; returns its id.
    pub(super) fn file(&mut self, address: &str, key: &str, mut msg: Message) -> String {
        let n = self.next();
        msg.id = opaque_id("AAMkAG", n);
        for a in &mut msg.attachments {
            let k = self.next();
            a.id = opaque_id("AAMkAGAT", k);
        }
        msg.conversation_id = format!("AAQkAG{}", store_conv(&msg.thread_root()));
        let mb = self.mailboxes.get_mut(address).expect("mailbox exists");
        msg.folder_id = mb.folder(key).expect("folder exists").id.clone();
        let id = msg.id.clone();
        mb.messages.push(msg);
        id
    }

    pub(super) fn add_mailbox(&mut self, address: &str) {
        let key = address.to_lowercase();
        if self.mailboxes.contains_key(&key) {
            return;
        }
        let n = self.next();
        let root_id = opaque_id("AAMkAGRT", n);
        let mut folders = Vec::new();
        for (wk, name) in WELL_KNOWN {
            let k = self.next();
            folders.push(Folder {
                id: opaque_id("AAMkAGFL", k),
                display_name: (*name).to_owned(),
                parent_id: root_id.clone(),
                well_known: Some(wk),
                is_hidden: false,
            });
        }
        self.mailboxes.insert(
            key,
            Mailbox {
                address: address.to_owned(),
                root_id,
                folders,
                messages: Vec::new(),
                categories: Vec::new(),
                contacts: Vec::new(),
            },
        );
    }

    /// Resolves (creating as needed) a folder path such as `Inbox/Projects`; the first segment
    /// may be a well-known name or a Maildir name (`INBOX`, `Sent`).
    pub(super) fn ensure_folder(&mut self, address: &str, path: &str) -> String {
        self.add_mailbox(address);
        let key = address.to_lowercase();
        let mut parent = self.mailboxes[&key].root_id.clone();
        for (i, seg) in path.split('/').filter(|s| !s.is_empty()).enumerate() {
            let mb = &self.mailboxes[&key];
            let wk = if i == 0 {
                let lower = seg.to_ascii_lowercase();
                let wk_key = match lower.as_str() {
                    "sent" | "sent items" => "sentitems",
                    "junk" | "junk email" | "spam" => "junkemail",
                    "trash" | "deleted items" => "deleteditems",
                    other => other,
                };
                mb.folders
                    .iter()
                    .find(|f| {
                        f.well_known == Some(wk_key) || f.display_name.eq_ignore_ascii_case(seg)
                    })
                    .filter(|f| f.parent_id == parent)
                    .map(|f| f.id.clone())
            } else {
                mb.folders
                    .iter()
                    .find(|f| f.parent_id == parent && f.display_name == seg)
                    .map(|f| f.id.clone())
            };
            parent = match wk {
                Some(id) => id,
                None => {
                    let n = self.next();
                    let id = opaque_id("AAMkAGFL", n);
                    self.mailboxes.get_mut(&key).unwrap().folders.push(Folder {
                        id: id.clone(),
                        display_name: seg.to_owned(),
                        parent_id: parent.clone(),
                        well_known: None,
                        is_hidden: false,
                    });
                    id
                }
            };
        }
        parent
    }
}

/// The fake's conversation id for a thread root: a hash, never the Message-ID itself.
fn store_conv(root: &str) -> String {
    use sha2::{Digest, Sha256};
    URL_SAFE_NO_PAD.encode(&Sha256::digest(root.as_bytes())[..30])
}

fn folder_not_found(key: &str, rid: u64) -> Reply {
    graph_error(
        404,
        "ErrorItemNotFound",
        &format!("The specified folder '{key}' was not found in the store."),
        rid,
    )
}

/// `$top` (1..=1000, default `default_top`) and `$skip`.
fn paging(ctx: &Ctx<'_>, default_top: usize, rid: u64) -> Result<(usize, usize), Reply> {
    let top = match ctx.param("$top") {
        None => default_top,
        Some(t) => match t.parse::<usize>() {
            Ok(n) if (1..=MAX_TOP).contains(&n) => n,
            _ => {
                return Err(graph_error(
                    400,
                    "ErrorInvalidArgument",
                    &format!("The value of $top must be between 1 and {MAX_TOP}; got '{t}'."),
                    rid,
                ));
            }
        },
    };
    let skip = match ctx.param("$skip") {
        None => 0,
        Some(s) => s
            .parse::<usize>()
            .map_err(|_| graph_error(400, "ErrorInvalidArgument", "Invalid $skip.", rid))?,
    };
    Ok((top, skip))
}

fn encode_skiptoken(offset: usize) -> String {
    format!(
        "MSG{}",
        URL_SAFE_NO_PAD.encode(format!("search-offset:{offset}"))
    )
}

fn decode_skiptoken(token: &str) -> Option<usize> {
    let bytes = URL_SAFE_NO_PAD.decode(token.strip_prefix("MSG")?).ok()?;
    String::from_utf8(bytes)
        .ok()?
        .strip_prefix("search-offset:")?
        .parse()
        .ok()
}

fn access_denied(rid: u64) -> Reply {
    graph_error(
        403,
        "ErrorAccessDenied",
        "Access is denied. Check credentials and try again.",
        rid,
    )
}

/// One page of a collection of `address`'s `collection` (Graph's `@odata.context` form), with a
/// nextLink carrying `more` (the paging parameter and its value) when items are left.
fn paged(
    ctx: &Ctx<'_>,
    address: &str,
    collection: &str,
    value: Vec<Value>,
    more: Option<(&str, String)>,
) -> Reply {
    let mut body = json!({
        "@odata.context": format!(
            "{}/$metadata#users('{}')/{collection}",
            ctx.base(),
            percent_encode(address)
        ),
        "value": value,
    });
    if let Some((key, next)) = more {
        body["@odata.nextLink"] = json!(ctx.next_link(key, &next));
    }
    Reply::json(200, &body)
}

/// Marks an uploaded message as the mailbox's own, as Graph files a draft or a sent copy: dated
/// now, read, sent from `address` unless the MIME said otherwise.
fn stamp_own(msg: &mut Message, address: &str, draft: bool) {
    let now = Utc::now();
    msg.received = now;
    msg.sent = now;
    msg.is_read = true;
    msg.is_draft = draft;
    if msg.from.is_none() {
        msg.from = Some(EmailAddress::new("", address));
    }
}
