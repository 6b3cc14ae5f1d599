//! A faithful, stateful fake Microsoft Graph v1.0 (and its token endpoint) on one wiremock
//! server, for the Graph backend's tests and the Graph benchmark. One `Respond` routes every
//! request against shared state, so moves move, copies copy, drafts and Sent copies appear.
//! Payloads and errors follow Graph's documented shapes and limits (`$search` with `$filter` or
//! `$orderby`, the 1,000-result search cap, `$orderby` properties first in `$filter`, `$top` ≤
//! 1000); faults (429/503/500, delays, malformed JSON, missing fields) are injected per route.
//! Per-folder `messages/delta` keeps its sync state server-side (`delta`), and can expire it.
//! Self-contained on purpose: benches include it by path (`#[path = "../tests/it/fake_graph/mod.rs"]
//! mod fake_graph;`), so it must not use `crate::util`. Fictional data only.
#![expect(
    dead_code,
    reason = "the `it` crate and the Graph bench each use a subset of the fake"
)]
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test fixture: a poisoned lock or a bad seed is a bug in the test"
)]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixture: seeding reads `.eml` files with std::fs"
)]

mod auth;
mod delta;
mod handlers;
pub(crate) mod query;
mod seed;
pub(crate) mod store;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use query::{percent_decode, percent_encode};
use store::iso;
pub(crate) use store::{Attachment, AttachmentContent, EmailAddress, Folder, Message};

/// The tenant the fake expects by default (fictional).
pub(crate) const TENANT: &str = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0";
/// The client id the fake expects by default (fictional).
pub(crate) const CLIENT_ID: &str = "5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d";
/// The client secret the fake expects by default: distinctive, so leak checks can find it.
pub(crate) const CLIENT_SECRET: &str = "fAkE~Secret.Value-0123456789abcdefXYZ";

/// Graph's maximum `$top` for messages and the `$search` result cap.
pub(crate) const MAX_TOP: usize = 1000;
pub(crate) const SEARCH_CAP: usize = 1000;

/// The request classes faults are injected on and the recording names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Route {
    Token,
    Folders,
    List,
    Search,
    Message,
    Attachments,
    AttachmentValue,
    Move,
    Copy,
    Patch,
    Draft,
    Send,
    /// `GET mailFolders/{id}/messages/delta`.
    Delta,
    /// `GET outlook/masterCategories`.
    Categories,
    /// `GET contacts`.
    Contacts,
    /// `GET people` (people search).
    People,
    /// `POST /v1.0/$batch` (its steps are recorded as their own routes too).
    Batch,
    Unknown,
}

impl Route {
    /// The least Graph application permission the route needs (`Mail.ReadWrite` implies
    /// `Mail.Read`); `None` for the token endpoint, `$batch` (its steps count) and unknown.
    pub(crate) fn permission(self) -> Option<&'static str> {
        match self {
            Route::Folders
            | Route::List
            | Route::Search
            | Route::Message
            | Route::Attachments
            | Route::AttachmentValue
            | Route::Delta => Some("Mail.Read"),
            Route::Move | Route::Copy | Route::Patch | Route::Draft => Some("Mail.ReadWrite"),
            Route::Send => Some("Mail.Send"),
            Route::Categories => Some("MailboxSettings.Read"),
            Route::Contacts => Some("Contacts.Read"),
            Route::People => Some("People.Read.All"),
            Route::Token | Route::Batch | Route::Unknown => None,
        }
    }
}

/// A `Retry-After` value: delta seconds or an HTTP date.
#[derive(Clone, Debug)]
pub(crate) enum RetryAfter {
    Seconds(u64),
    HttpDate(DateTime<Utc>),
}

impl RetryAfter {
    fn header(&self) -> String {
        match self {
            RetryAfter::Seconds(s) => s.to_string(),
            RetryAfter::HttpDate(at) => at.format("%a, %d %b %Y %H:%M:%S GMT").to_string(),
        }
    }
}

/// What an injected fault does.
#[derive(Clone, Debug)]
pub(crate) enum FaultKind {
    /// 429 `TooManyRequests` with `Retry-After`.
    Throttle(RetryAfter),
    /// 503 `ServiceNotAvailable`, with or without `Retry-After`.
    Unavailable(Option<RetryAfter>),
    /// 500 `InternalServerError`.
    ServerError,
    /// The normal answer, late by this much (longer than the client's timeout, say).
    Delay(Duration),
    /// The normal answer's status with its body cut in half: invalid JSON.
    MalformedJson,
    /// The normal answer without this property (in each `value[]` item, or the object itself).
    MissingField(String),
}

/// One injected fault: on `route`, from its `nth` request (1-based; any by default), `times`
/// times (once by default).
#[derive(Clone, Debug)]
pub(crate) struct Fault {
    pub(crate) route: Route,
    pub(crate) nth: Option<u32>,
    pub(crate) times: u32,
    pub(crate) kind: FaultKind,
}

impl Fault {
    /// Fires once, on the next request of `route`.
    pub(crate) fn new(route: Route, kind: FaultKind) -> Self {
        Self {
            route,
            nth: None,
            times: 1,
            kind,
        }
    }
    /// Fires from the `n`th request of the route (counted from the fake's start), e.g. page 3.
    pub(crate) fn nth(mut self, n: u32) -> Self {
        self.nth = Some(n);
        self
    }
    /// Fires this many times (consecutive matching requests).
    pub(crate) fn times(mut self, times: u32) -> Self {
        self.times = times;
        self
    }
    /// Fires on every matching request.
    pub(crate) fn always(mut self) -> Self {
        self.times = u32::MAX;
        self
    }
}

/// One request as the fake saw it.
#[derive(Clone, Debug)]
pub(crate) struct RecordedRequest {
    pub(crate) method: String,
    /// The full URL as sent (percent-encoded).
    pub(crate) url: String,
    /// The path, percent-decoded segment by segment.
    pub(crate) path: String,
    pub(crate) query: Vec<(String, String)>,
    /// Header names lower-cased.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    pub(crate) route: Route,
    /// The `{address}` segment of `/users/{address}/…`, decoded.
    pub(crate) user: Option<String>,
}

impl RecordedRequest {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A message handed to `/sendMail`.
#[derive(Clone, Debug)]
pub(crate) struct SentMail {
    pub(crate) mailbox: String,
    pub(crate) from: Option<String>,
    pub(crate) to: Vec<String>,
    pub(crate) cc: Vec<String>,
    pub(crate) bcc: Vec<String>,
    pub(crate) subject: String,
    pub(crate) in_reply_to: Option<String>,
    pub(crate) mime: Vec<u8>,
}

/// How the last successful token request authenticated.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ClientAuth {
    Secret,
    /// The assertion's claims.
    Assertion(Value),
}

struct Mailbox {
    address: String,
    root_id: String,
    folders: Vec<Folder>,
    messages: Vec<Message>,
    /// `outlook/masterCategories` display names.
    categories: Vec<String>,
    /// `contacts` (and what `people` searches): (display name, address).
    contacts: Vec<(String, String)>,
}

impl Mailbox {
    fn folder(&self, key: &str) -> Option<&Folder> {
        self.folders.iter().find(|f| f.id == key).or_else(|| {
            self.folders
                .iter()
                .find(|f| f.well_known.is_some_and(|w| w.eq_ignore_ascii_case(key)))
        })
    }
    fn folder_json(&self, f: &Folder) -> Map<String, Value> {
        let in_folder = self.messages.iter().filter(|m| m.folder_id == f.id);
        let total = in_folder.clone().count();
        let unread = in_folder.filter(|m| !m.is_read).count();
        let children = self.folders.iter().filter(|c| c.parent_id == f.id).count();
        let mut m = Map::new();
        m.insert("id".into(), json!(f.id));
        m.insert("displayName".into(), json!(f.display_name));
        m.insert("parentFolderId".into(), json!(f.parent_id));
        m.insert("childFolderCount".into(), json!(children));
        m.insert("unreadItemCount".into(), json!(unread));
        m.insert("totalItemCount".into(), json!(total));
        m.insert("sizeInBytes".into(), json!(total * 4096));
        m.insert("isHidden".into(), json!(f.is_hidden));
        m
    }
}

struct Token {
    generation: u64,
    issued: Instant,
    lifetime: Duration,
}

struct State {
    tenant: String,
    client_id: String,
    client_secret: Option<String>,
    public_key: Option<Vec<u8>>,
    x5t_s256: Option<String>,
    token_lifetime: u64,
    tokens: HashMap<String, Token>,
    generation: u64,
    token_requests: usize,
    last_client_auth: Option<ClientAuth>,
    mailboxes: BTreeMap<String, Mailbox>,
    ignore_search: BTreeSet<String>,
    /// Application permissions granted; `None` grants everything.
    granted: Option<BTreeSet<String>>,
    /// Mailboxes the app may reach (RBAC for Applications); `None` reaches all.
    app_scope: Option<BTreeSet<String>>,
    faults: Vec<Fault>,
    route_counts: HashMap<Route, u32>,
    latency: Duration,
    /// Response body bytes served by Graph routes (not the token endpoint), for benchmarks.
    served_bytes: u64,
    requests: Vec<RecordedRequest>,
    sent: Vec<SentMail>,
    counter: u64,
    origin: String,
    /// Delta rounds by their `$skiptoken`/`$deltatoken`.
    delta_tokens: HashMap<String, delta::DeltaToken>,
    /// Tokens issued before this generation have lost their sync state (410).
    delta_generation: u64,
}

/// A response before it becomes a `ResponseTemplate`, so faults can rewrite it.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    content_type: String,
    delay: Option<Duration>,
}

impl Reply {
    fn json(status: u16, v: &Value) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: serde_json::to_vec(v).unwrap(),
            content_type: "application/json; odata.metadata=minimal; odata.streaming=true; IEEE754Compatible=false; charset=utf-8".into(),
            delay: None,
        }
    }
    fn bytes(status: u16, body: Vec<u8>, content_type: &str) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body,
            content_type: content_type.to_owned(),
            delay: None,
        }
    }
    fn empty(status: u16) -> Self {
        Self::bytes(status, Vec::new(), "")
    }
    fn template(self) -> ResponseTemplate {
        let mut t = ResponseTemplate::new(self.status);
        if !self.body.is_empty() {
            t = t.set_body_raw(self.body, &self.content_type);
        }
        for (k, v) in self.headers {
            t = t.insert_header(k.as_str(), v.as_str());
        }
        if let Some(d) = self.delay {
            t = t.set_delay(d);
        }
        t
    }
}

/// A request as the router sees it: from wiremock, or one step of a `$batch`.
struct Incoming {
    method: String,
    /// Percent-encoded path, `/v1.0/users/…`.
    raw_path: String,
    raw_query: Option<String>,
    /// Names lower-cased.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// What the Prefer header asked for.
#[derive(Clone, Copy, Default)]
struct Prefer {
    immutable_ids: bool,
    body_as_text: bool,
    /// `odata.maxpagesize=N`.
    max_page_size: Option<usize>,
}

/// Per-request context the Graph handlers need.
struct Ctx<'a> {
    origin: String,
    raw_path: &'a str,
    query: &'a [(String, String)],
    prefer: Prefer,
    body: &'a [u8],
    content_type: String,
}

impl Ctx<'_> {
    fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    fn base(&self) -> String {
        format!("{}/v1.0", self.origin)
    }
    /// The same request's URL with `key` set to `value`, as Graph builds `@odata.nextLink`.
    fn next_link(&self, key: &str, value: &str) -> String {
        let mut pairs: Vec<(String, String)> = self
            .query
            .iter()
            .filter(|(k, _)| k != key)
            .cloned()
            .collect();
        pairs.push((key.to_owned(), value.to_owned()));
        let q = pairs
            .iter()
            .map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        format!("{}{}?{q}", self.origin, self.raw_path)
    }
    fn select(&self) -> Option<Vec<String>> {
        self.param("$select").map(|s| {
            s.split(',')
                .map(|p| p.trim().to_owned())
                .filter(|p| !p.is_empty())
                .collect()
        })
    }
}

fn graph_error(status: u16, code: &str, message: &str, request_id: u64) -> Reply {
    let rid = format!("{:08x}-0000-4000-8000-{:012x}", request_id, request_id);
    Reply::json(
        status,
        &json!({"error": {
            "code": code,
            "message": message,
            "innerError": {
                "date": iso(Utc::now()),
                "request-id": rid,
                "client-request-id": rid,
            }
        }}),
    )
}

/// Keeps only `select` (plus `id` and `@odata.etag`/`@odata.type`); `Err` names an unknown one.
fn apply_select(
    mut full: Map<String, Value>,
    select: Option<&[String]>,
    default_hidden: &[&str],
) -> Result<Map<String, Value>, String> {
    match select {
        None => {
            for h in default_hidden {
                full.remove(*h);
            }
            Ok(full)
        }
        Some(props) => {
            if let Some(bad) = props.iter().find(|p| !full.contains_key(p.as_str())) {
                return Err(bad.clone());
            }
            full.retain(|k, _| {
                k == "id" || k == "@odata.etag" || k == "@odata.type" || props.contains(k)
            });
            Ok(full)
        }
    }
}

impl State {
    fn next(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    fn handle(&mut self, req: &Request) -> Reply {
        let incoming = Incoming {
            method: req.method.as_str().to_owned(),
            raw_path: req.url.path().to_owned(),
            raw_query: req.url.query().map(str::to_owned),
            headers: req
                .headers
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_ascii_lowercase(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body: req.body.clone(),
        };
        self.dispatch(&incoming, true)
    }

    /// Serves one request; `top_level` is false for the steps of a `$batch`, which share the
    /// batch's latency.
    fn dispatch(&mut self, inc: &Incoming, top_level: bool) -> Reply {
        let method = inc.method.clone();
        let raw_path = inc.raw_path.clone();
        let segs: Vec<String> = raw_path
            .split('/')
            .skip(1)
            .map(|s| percent_decode(s, false))
            .collect();
        let query = query::parse_form(inc.raw_query.as_deref().unwrap_or(""));
        let headers = inc.headers.clone();
        let route = classify(&method, &segs, &query);
        let user = (segs.get(1).map(String::as_str) == Some("users"))
            .then(|| segs.get(2).cloned())
            .flatten();
        self.requests.push(RecordedRequest {
            method: method.clone(),
            url: format!(
                "{}{}{}",
                self.origin,
                inc.raw_path,
                inc.raw_query
                    .as_deref()
                    .map(|q| format!("?{q}"))
                    .unwrap_or_default()
            ),
            path: format!("/{}", segs.join("/")),
            query: query.clone(),
            headers: headers.clone(),
            body: inc.body.clone(),
            route,
            user: user.clone(),
        });
        let count = {
            let c = self.route_counts.entry(route).or_insert(0);
            *c += 1;
            *c
        };
        let fault = self.take_fault(route, count);
        let latency = if route == Route::Token || !top_level {
            None
        } else {
            Some(self.latency).filter(|d| !d.is_zero())
        };
        let rid = self.next();
        let mut reply = match &fault {
            Some(FaultKind::Throttle(ra)) => {
                let mut r = graph_error(
                    429,
                    "TooManyRequests",
                    "Application is over its MailboxConcurrency limit.",
                    rid,
                );
                r.headers.push(("Retry-After".into(), ra.header()));
                r
            }
            Some(FaultKind::Unavailable(ra)) => {
                let mut r = graph_error(
                    503,
                    "ServiceNotAvailable",
                    "The service is temporarily unavailable.",
                    rid,
                );
                if let Some(ra) = ra {
                    r.headers.push(("Retry-After".into(), ra.header()));
                }
                r
            }
            Some(FaultKind::ServerError) => graph_error(
                500,
                "InternalServerError",
                "An internal server error occurred.",
                rid,
            ),
            _ => {
                // wiremock's `Request::url` names `localhost` without the port: the origin is
                // the server's own URI, recorded at start.
                let origin = self.origin.clone();
                let content_type = headers
                    .iter()
                    .find(|(k, _)| k == "content-type")
                    .map(|(_, v)| v.to_ascii_lowercase())
                    .unwrap_or_default();
                let prefer_all = headers
                    .iter()
                    .filter(|(k, _)| k == "prefer")
                    .map(|(_, v)| v.to_ascii_lowercase())
                    .collect::<Vec<_>>()
                    .join(",");
                let ctx = Ctx {
                    origin,
                    raw_path: &raw_path,
                    query: &query,
                    prefer: Prefer {
                        immutable_ids: prefer_all.contains("idtype=\"immutableid\""),
                        body_as_text: prefer_all.contains("outlook.body-content-type=\"text\""),
                        max_page_size: prefer_all.split(',').find_map(|p| {
                            p.trim()
                                .strip_prefix("odata.maxpagesize=")?
                                .trim()
                                .parse()
                                .ok()
                        }),
                    },
                    body: &inc.body,
                    content_type,
                };
                if route == Route::Token {
                    self.token(&ctx, &segs)
                } else {
                    let auth = headers
                        .iter()
                        .find(|(k, _)| k == "authorization")
                        .map(|(_, v)| v.as_str());
                    if self.token_valid(auth) {
                        if route == Route::Batch {
                            if top_level {
                                self.batch(inc, rid)
                            } else {
                                graph_error(400, "BadRequest", "A $batch cannot nest.", rid)
                            }
                        } else {
                            self.graph(route, &method, &segs, &ctx, rid)
                        }
                    } else {
                        let mut r = graph_error(
                            401,
                            "InvalidAuthenticationToken",
                            "Access token has expired or is not yet valid.",
                            rid,
                        );
                        r.headers.push((
                            "WWW-Authenticate".into(),
                            "Bearer realm=\"\", error=\"invalid_token\"".into(),
                        ));
                        r
                    }
                }
            }
        };
        match fault {
            Some(FaultKind::Delay(d)) => reply.delay = Some(d),
            Some(FaultKind::MalformedJson) => {
                reply.status = if reply.status >= 400 {
                    200
                } else {
                    reply.status
                };
                let cut = reply.body.len() / 2;
                reply.body.truncate(cut.max(1));
                if reply.body.is_empty() {
                    reply.body = b"{".to_vec();
                }
            }
            Some(FaultKind::MissingField(name)) => {
                if let Ok(mut v) = serde_json::from_slice::<Value>(&reply.body) {
                    if let Some(items) = v.get_mut("value").and_then(Value::as_array_mut) {
                        for item in items {
                            if let Some(o) = item.as_object_mut() {
                                o.remove(&name);
                            }
                        }
                    } else if let Some(o) = v.as_object_mut() {
                        o.remove(&name);
                    }
                    reply.body = serde_json::to_vec(&v).unwrap();
                }
            }
            _ => {}
        }
        if let Some(l) = latency {
            reply.delay = Some(reply.delay.unwrap_or_default() + l);
        }
        reply
    }

    fn take_fault(&mut self, route: Route, count: u32) -> Option<FaultKind> {
        let f = self
            .faults
            .iter_mut()
            .find(|f| f.route == route && f.times > 0 && f.nth.is_none_or(|n| count >= n))?;
        if f.times != u32::MAX {
            f.times -= 1;
        }
        Some(f.kind.clone())
    }
}

/// Which request class a request is (for faults and recording).
fn classify(method: &str, segs: &[String], query: &[(String, String)]) -> Route {
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    if method == "POST" && s.len() == 4 && s[1] == "oauth2" && s[2] == "v2.0" && s[3] == "token" {
        return Route::Token;
    }
    if method == "POST" && s.as_slice() == ["v1.0", "$batch"] {
        return Route::Batch;
    }
    let ["v1.0", "users", _, rest @ ..] = s.as_slice() else {
        return Route::Unknown;
    };
    let searching = query.iter().any(|(k, _)| k == "$search");
    let listing = if searching {
        Route::Search
    } else {
        Route::List
    };
    match (method, rest) {
        ("GET", ["mailFolders"]) | ("GET", ["mailFolders", _]) => Route::Folders,
        ("GET", ["mailFolders", _, "childFolders"]) => Route::Folders,
        ("GET", ["mailFolders", _, "messages"]) | ("GET", ["messages"]) => listing,
        ("GET", ["mailFolders", _, "messages", "delta"]) => Route::Delta,
        ("POST", ["messages"]) => Route::Draft,
        ("GET", ["messages", _]) => Route::Message,
        ("PATCH", ["messages", _]) => Route::Patch,
        ("GET", ["messages", _, "attachments"]) | ("GET", ["messages", _, "attachments", _]) => {
            Route::Attachments
        }
        ("GET", ["messages", _, "attachments", _, "$value"]) => Route::AttachmentValue,
        ("POST", ["messages", _, "move"]) => Route::Move,
        ("POST", ["messages", _, "copy"]) => Route::Copy,
        ("POST", ["sendMail"]) => Route::Send,
        ("GET", ["outlook", "masterCategories"]) => Route::Categories,
        ("GET", ["contacts"]) => Route::Contacts,
        ("GET", ["people"]) => Route::People,
        _ => Route::Unknown,
    }
}

/// The wiremock responder: every request goes through the shared state.
struct Responder {
    state: Arc<Mutex<State>>,
}

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let reply = state.handle(request);
        if request.url.path().starts_with("/v1.0/") {
            state.served_bytes += reply.body.len() as u64;
        }
        reply.template()
    }
}

/// The fake Graph: one wiremock server serving both the token endpoint (`{uri}/{tenant}/…`)
/// and Graph (`{uri}/v1.0/…`), plus the knobs and recordings the tests use.
pub(crate) struct FakeGraph {
    server: MockServer,
    state: Arc<Mutex<State>>,
}

impl FakeGraph {
    /// Starts an empty fake expecting [`TENANT`], [`CLIENT_ID`] and [`CLIENT_SECRET`], with
    /// one-hour tokens and no latency.
    pub(crate) async fn start() -> Self {
        let state = Arc::new(Mutex::new(State {
            tenant: TENANT.into(),
            client_id: CLIENT_ID.into(),
            client_secret: Some(CLIENT_SECRET.into()),
            public_key: None,
            x5t_s256: None,
            token_lifetime: 3599,
            tokens: HashMap::new(),
            generation: 0,
            token_requests: 0,
            last_client_auth: None,
            mailboxes: BTreeMap::new(),
            ignore_search: BTreeSet::new(),
            granted: None,
            app_scope: None,
            faults: Vec::new(),
            route_counts: HashMap::new(),
            latency: Duration::ZERO,
            served_bytes: 0,
            requests: Vec::new(),
            sent: Vec::new(),
            counter: 0,
            origin: String::new(),
            delta_tokens: HashMap::new(),
            delta_generation: 0,
        }));
        let server = MockServer::start().await;
        state.lock().unwrap().origin = server.uri();
        Mock::given(any())
            .respond_with(Responder {
                state: Arc::clone(&state),
            })
            .mount(&server)
            .await;
        Self { server, state }
    }

    fn st(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `http://127.0.0.1:PORT`: the login URL (`MAILGATE_GRAPH_LOGIN_URL`).
    pub(crate) fn uri(&self) -> String {
        self.server.uri()
    }
    /// `{uri}/v1.0`: the Graph base URL (`MAILGATE_GRAPH_BASE_URL`).
    pub(crate) fn base_url(&self) -> String {
        format!("{}/v1.0", self.server.uri())
    }
    /// `{uri}/{tenant}/oauth2/v2.0/token` for the expected tenant: the assertion's `aud`.
    pub(crate) fn token_url(&self) -> String {
        format!(
            "{}/{}/oauth2/v2.0/token",
            self.server.uri(),
            self.st().tenant
        )
    }

    // --- auth knobs -------------------------------------------------------------------------

    /// Sets the expected tenant, client id and secret (`None`: secrets are refused).
    pub(crate) fn set_credentials(&self, tenant: &str, client_id: &str, secret: Option<&str>) {
        let mut st = self.st();
        st.tenant = tenant.into();
        st.client_id = client_id.into();
        st.client_secret = secret.map(str::to_owned);
    }
    /// Verifies assertion signatures with this RSA public key (DER, as aws-lc-rs's
    /// `RsaKeyPair::public_key().as_ref()` gives it).
    pub(crate) fn set_assertion_key(&self, public_key_der: &[u8]) {
        self.st().public_key = Some(public_key_der.to_vec());
    }
    /// Grants only these application permissions (`Mail.Read`, `Mail.ReadWrite`, `Mail.Send`):
    /// a request needing another answers 403 `ErrorAccessDenied`.
    pub(crate) fn grant(&self, permissions: &[&str]) {
        self.st().granted = Some(permissions.iter().map(|p| (*p).to_owned()).collect());
    }
    /// Confines the app to these mailboxes (Exchange RBAC for Applications): any other
    /// existing mailbox answers 403 `ErrorAccessDenied`.
    pub(crate) fn scope_app_to(&self, addresses: &[&str]) {
        self.st().app_scope = Some(addresses.iter().map(|a| a.to_lowercase()).collect());
    }
    /// Refuses assertions whose header `x5t#S256` is not this (base64url SHA-256 thumbprint).
    pub(crate) fn set_assertion_thumbprint(&self, x5t_s256: &str) {
        self.st().x5t_s256 = Some(x5t_s256.to_owned());
    }
    /// The environment a mailgate child needs to reach this fake with the default secret:
    /// `MICROSOFT_GRAPH_TENANT_ID`, `_CLIENT_ID`, `_CLIENT_SECRET`, `MAILGATE_GRAPH_LOGIN_URL`,
    /// `MAILGATE_GRAPH_BASE_URL`.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        let st = self.st();
        let mut env = vec![
            ("MICROSOFT_GRAPH_TENANT_ID".to_owned(), st.tenant.clone()),
            ("MICROSOFT_GRAPH_CLIENT_ID".to_owned(), st.client_id.clone()),
            ("MAILGATE_GRAPH_LOGIN_URL".to_owned(), self.server.uri()),
            ("MAILGATE_GRAPH_BASE_URL".to_owned(), self.base_url()),
        ];
        if let Some(secret) = &st.client_secret {
            env.push(("MICROSOFT_GRAPH_CLIENT_SECRET".to_owned(), secret.clone()));
        }
        env
    }
    /// Lifetime of tokens issued from now on (`expires_in`), in seconds.
    pub(crate) fn set_token_lifetime(&self, secs: u64) {
        self.st().token_lifetime = secs;
    }
    /// Invalidates every token issued so far: Graph then answers 401.
    pub(crate) fn expire_tokens(&self) {
        self.st().generation += 1;
    }
    /// How many token requests arrived (valid or not).
    pub(crate) fn token_requests(&self) -> usize {
        self.st().token_requests
    }
    /// How the last successful token request authenticated.
    pub(crate) fn last_client_auth(&self) -> Option<ClientAuth> {
        self.st().last_client_auth.clone()
    }
    /// A valid token without a token request (for tests that drive Graph directly).
    pub(crate) fn issue_token(&self) -> String {
        self.st().issue_token()
    }

    // --- behaviour knobs --------------------------------------------------------------------

    /// Makes `$search` on this mailbox return every message in scope, as a Graph that ignores
    /// the query would (what mailgate's canary detects).
    pub(crate) fn ignore_search(&self, address: &str) {
        self.st().ignore_search.insert(address.to_lowercase());
    }
    /// Delays every Graph response (not the token endpoint) by this much.
    /// Graph response body bytes served so far (token endpoint excluded).
    pub(crate) fn served_bytes(&self) -> u64 {
        self.st().served_bytes
    }

    pub(crate) fn latency(&self, d: Duration) {
        self.st().latency = d;
    }
    /// Adds a fault; faults are tried in insertion order, the first live match fires.
    pub(crate) fn inject(&self, fault: Fault) {
        self.st().faults.push(fault);
    }
    /// Removes every fault.
    pub(crate) fn clear_faults(&self) {
        self.st().faults.clear();
    }

    // --- inspection -------------------------------------------------------------------------

    /// The folder id of a path or well-known name (`inbox`, `Inbox/Projects`).
    pub(crate) fn folder_id(&self, address: &str, path: &str) -> Option<String> {
        let st = self.st();
        let mb = st.mailboxes.get(&address.to_lowercase())?;
        if let Some(f) = mb.folder(path) {
            return Some(f.id.clone());
        }
        let mut parent = mb.root_id.clone();
        for (i, seg) in path.split('/').enumerate() {
            let f = mb.folders.iter().find(|f| {
                f.parent_id == parent
                    && (f.display_name.eq_ignore_ascii_case(seg)
                        || (i == 0 && f.well_known.is_some_and(|w| w.eq_ignore_ascii_case(seg))))
            })?;
            parent = f.id.clone();
        }
        Some(parent)
    }
    /// The messages now in a folder (path or well-known name), in filing order.
    pub(crate) fn messages_in(&self, address: &str, path: &str) -> Vec<Message> {
        let Some(fid) = self.folder_id(address, path) else {
            return Vec::new();
        };
        let st = self.st();
        st.mailboxes[&address.to_lowercase()]
            .messages
            .iter()
            .filter(|m| m.folder_id == fid)
            .cloned()
            .collect()
    }
    /// One message by id, wherever it is.
    pub(crate) fn message(&self, address: &str, id: &str) -> Option<Message> {
        let st = self.st();
        st.mailboxes
            .get(&address.to_lowercase())?
            .messages
            .iter()
            .find(|m| m.id == id)
            .cloned()
    }
    /// The id of the first message with this subject.
    pub(crate) fn id_by_subject(&self, address: &str, subject: &str) -> Option<String> {
        let st = self.st();
        st.mailboxes
            .get(&address.to_lowercase())?
            .messages
            .iter()
            .find(|m| m.subject == subject)
            .map(|m| m.id.clone())
    }
    /// Every message handed to `/sendMail`, in order.
    pub(crate) fn sent(&self) -> Vec<SentMail> {
        self.st().sent.clone()
    }
    /// Every request so far (token endpoint included), in arrival order.
    pub(crate) fn requests(&self) -> Vec<RecordedRequest> {
        self.st().requests.clone()
    }
    /// How many requests of a route arrived.
    pub(crate) fn count(&self, route: Route) -> usize {
        self.st()
            .requests
            .iter()
            .filter(|r| r.route == route)
            .count()
    }
    /// How many requests of a route arrived since the start (what [`Fault::nth`] counts;
    /// `clear_requests` does not reset it): `Fault::nth(fake.route_count(r) + 3)` is "the third
    /// from now".
    pub(crate) fn route_count(&self, route: Route) -> u32 {
        self.st().route_counts.get(&route).copied().unwrap_or(0)
    }
    /// The permissions the recorded Graph requests needed (per `Route::permission`).
    pub(crate) fn permissions_used(&self) -> BTreeSet<&'static str> {
        self.st()
            .requests
            .iter()
            .filter_map(|r| r.route.permission())
            .collect()
    }
    /// The (method, route) pairs seen.
    pub(crate) fn routes_seen(&self) -> BTreeSet<(String, Route)> {
        self.st()
            .requests
            .iter()
            .map(|r| (r.method.clone(), r.route))
            .collect()
    }
    /// Forgets the recorded requests (route counts for `Fault::nth` keep counting).
    pub(crate) fn clear_requests(&self) {
        self.st().requests.clear();
    }
    /// Panics if any secret appears in any request URL, raw or percent-decoded.
    pub(crate) fn assert_no_secret_in_urls(&self, secrets: &[&str]) {
        for r in self.requests() {
            let decoded = percent_decode(&r.url, true);
            for s in secrets.iter().filter(|s| !s.is_empty()) {
                assert!(
                    !r.url.contains(s) && !decoded.contains(s),
                    "a secret appears in the URL of {} {}",
                    r.method,
                    r.path
                );
            }
        }
    }
    /// Panics if a `/users/{x}` path names an address outside `allowed` (case-insensitive).
    pub(crate) fn assert_users_within(&self, allowed: &[&str]) {
        for r in self.requests() {
            if let Some(u) = &r.user {
                assert!(
                    allowed.iter().any(|a| a.eq_ignore_ascii_case(u)),
                    "{} {} names a mailbox outside the allowlist: {u}",
                    r.method,
                    r.path
                );
            }
        }
    }
}
