//! The Microsoft Graph backend: one [`GraphStore`] per Graph mailbox, pinned at startup to the
//! mailbox's address, sharing the process's [`GraphClient`] (connection pool and app token), or,
//! for a mailbox with `backend.auth` (issue 37), with a client of its own whose bearer is its
//! alias's delegated token ([`delegated_client`]). Routes are `/users/{address}` either way: the
//! signed-in user's own mailbox, or a shared one its `.Shared` scopes reach.
//!
//! Reads map to `mailFolders`, `messages` (`$filter` listings, `$search` relevance search) and
//! `attachments`; writes to `move`, `copy`, `PATCH isRead` and a MIME `POST messages` (drafts);
//! sending to a MIME `sendMail` that files the Sent copy itself ([`GraphSender`]). Paging
//! follows `@odata.nextLink` within the request's budget, and whatever stops it early (a limit,
//! the deadline, a failed or malformed page, Graph's 1,000-result cap on `$search`) is reported
//! in the [`Page`], never hidden. Ids are immutable (`Prefer: IdType="ImmutableId"`), so an id
//! survives a move. The local index syncs from per-folder `messages/delta` (`delta`). No
//! operation deletes anything.

pub(crate) mod assertion;
pub(crate) mod auth;
pub(crate) mod client;
mod delta;
pub(crate) mod endpoints;
pub(crate) mod wire;

use std::sync::Arc;
use std::time::Instant;

use reqwest::Method;

use self::auth::{AppCredential, GraphTokens, TokenSource};
use self::client::{Body, GraphClient, Repeat, Request};
use self::endpoints::Endpoints;
use self::wire::{
    Attachment, AttachmentKind, Category, Collection, ContactItem, Folder, Message, Person,
};
use super::changes::FolderSync;
use super::model::{
    Capabilities, ContentGap, Flags, FolderInfo, FolderSelector, FolderStats, ItemResult,
    MessageDetail, MessageSummary, MessageText, Page, ScanRequest, ScanStop, SearchKind, WellKnown,
};
use super::{AttachmentMeta, BackendError, MailStore, MailWrite, OPERATION_DEADLINE};
use crate::backends::bearer::DelegatedBearer;
use crate::config::graph::{GraphCredential, GraphSettings};
use crate::coordination::upstream::{AccountKey, AccountLimits, AccountPlan};
use crate::outbound::{SendPermit, SentMessage};
use crate::path_guard;

/// Requests one mailbox may have in flight (Exchange Online's limit per app and mailbox).
const MAX_CONCURRENT_PER_MAILBOX: usize = 4;
/// Items per page asked of Graph (`$top`; Graph's documented page maximum for messages is
/// 1,000, but 100 keeps a page's memory and latency small).
const PAGE_SIZE: usize = 100;
/// Graph returns at most this many `$search` results, however many match.
pub(crate) const SEARCH_RESULT_CAP: usize = 1_000;
/// Folders listed at most (tree walk), and how deep.
const MAX_FOLDERS: usize = 1_000;
const MAX_FOLDER_DEPTH: usize = 10;
/// Steps in one `$batch` request (Graph's maximum).
const BATCH_STEPS: usize = 20;
/// Largest PEM file accepted for the certificate credential.
const MAX_PEM_BYTES: u64 = 64 * 1024;

/// Why the Graph client could not be prepared at startup (names the variable and the rule).
#[derive(Debug, thiserror::Error)]
pub(crate) enum GraphSetupError {
    #[error("{var} {why}")]
    Url {
        var: &'static str,
        why: endpoints::UrlError,
    },
    #[error("{var} is refused: {why}")]
    File {
        var: &'static str,
        why: path_guard::PrivateFileError,
    },
    #[error("the certificate credential is refused: {0}")]
    Certificate(assertion::AssertionError),
    #[error("the HTTPS client could not be built")]
    Http,
}

/// Builds the process's Graph client from the resolved settings: checks both roots, reads and
/// checks the certificate files (owner-only, like plugin.json), builds the HTTPS client.
pub(crate) fn client(settings: &GraphSettings) -> Result<Arc<GraphClient>, GraphSetupError> {
    use crate::config::graph::{CERTIFICATE_VAR, PRIVATE_KEY_VAR};
    let endpoints = Endpoints::new(&settings.base_url, &settings.login_url, &settings.tenant_id)
        .map_err(|(var, why)| GraphSetupError::Url { var, why })?;
    let credential = match &settings.credential {
        GraphCredential::ClientSecret(secret) => AppCredential::Secret(secret.clone()),
        GraphCredential::Certificate {
            certificate,
            private_key,
        } => {
            let key = path_guard::read_private_file(private_key, MAX_PEM_BYTES).map_err(|why| {
                GraphSetupError::File {
                    var: if private_key == certificate {
                        CERTIFICATE_VAR
                    } else {
                        PRIVATE_KEY_VAR
                    },
                    why,
                }
            })?;
            let cert = if certificate == private_key {
                key.clone()
            } else {
                path_guard::read_optional_trusted_file(certificate, MAX_PEM_BYTES)
                    .map_err(|why| GraphSetupError::File {
                        var: CERTIFICATE_VAR,
                        why,
                    })?
                    .ok_or(GraphSetupError::File {
                        var: CERTIFICATE_VAR,
                        why: path_guard::PrivateFileError::NotAvailable,
                    })?
            };
            AppCredential::Certificate(
                assertion::CertificateCredential::from_pem(&key, &cert)
                    .map_err(GraphSetupError::Certificate)?,
            )
        }
    };
    let http = https()?;
    let tokens = TokenSource::new(
        http.clone(),
        endpoints.token_url().clone(),
        endpoints.scope().to_owned(),
        settings.client_id.clone(),
        credential,
    );
    Ok(Arc::new(GraphClient::new(
        http,
        GraphTokens::App(Box::new(tokens)),
        endpoints,
    )))
}

/// The Graph client of one mailbox with `backend.auth`: its requests carry `bearer`'s tokens,
/// to the same roots as the app's client (`base_url` is `MAILGATE_GRAPH_BASE_URL` or the public
/// cloud's, checked the same way). Nothing is requested here: a token is refreshed at the first
/// call that needs one, so an alias that has not signed in yet fails its calls, not startup.
pub(crate) fn delegated_client(
    base_url: &str,
    login_url: &str,
    bearer: DelegatedBearer,
) -> Result<Arc<GraphClient>, GraphSetupError> {
    // The app-only token URL `Endpoints` derives from the login root is never used here: a
    // delegated token comes from the alias's own token endpoint (`delegated::endpoints`).
    let endpoints = Endpoints::new(base_url, login_url, "common")
        .map_err(|(var, why)| GraphSetupError::Url { var, why })?;
    Ok(Arc::new(GraphClient::new(
        https()?,
        GraphTokens::Delegated(bearer),
        endpoints,
    )))
}

/// The HTTPS client under a Graph client: bounded connects and requests, no redirects.
fn https() -> Result<reqwest::Client, GraphSetupError> {
    reqwest::Client::builder()
        .connect_timeout(client::CONNECT_TIMEOUT)
        .timeout(client::REQUEST_TIMEOUT)
        // A redirect would carry the request elsewhere; Graph does not redirect these calls.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|_| GraphSetupError::Http)
}

/// One Graph mailbox: the shared client, the pinned address and the mailbox's limits (its
/// request gate, shared by every alias of the mailbox).
pub(crate) struct GraphStore {
    client: Arc<GraphClient>,
    address: String,
    mailbox: Arc<AccountLimits>,
}

/// The account a Graph mailbox is, and what a store needs of it (Graph counts concurrent
/// requests per mailbox).
pub(crate) fn account(address: &str) -> (AccountKey, AccountPlan) {
    (
        AccountKey::graph(address),
        AccountPlan {
            per_minute: None,
            at_once: MAX_CONCURRENT_PER_MAILBOX,
        },
    )
}

impl GraphStore {
    pub(crate) fn new(
        client: Arc<GraphClient>,
        address: &str,
        mailbox: Arc<AccountLimits>,
    ) -> Self {
        Self {
            client,
            address: address.to_ascii_lowercase(),
            mailbox,
        }
    }

    /// The mailbox's request gate.
    fn gate(&self) -> &AccountLimits {
        &self.mailbox
    }

    fn url(&self, segments: &[&str]) -> reqwest::Url {
        self.client.endpoints().user(&self.address, segments)
    }

    fn deadline() -> Instant {
        Instant::now() + OPERATION_DEADLINE
    }

    async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        url: reqwest::Url,
        deadline: Instant,
    ) -> Result<T, BackendError> {
        self.client
            .json(self.gate(), &Request::get(url), deadline)
            .await
    }

    /// Every page of a folder collection, following nextLinks (bounded by [`MAX_FOLDERS`]).
    async fn folder_pages(
        &self,
        first: reqwest::Url,
        out: &mut Vec<Folder>,
        deadline: Instant,
    ) -> Result<(), BackendError> {
        let mut next = Some(first);
        while let Some(url) = next.take() {
            let page: Collection<Folder> = self.get_json(url, deadline).await?;
            out.extend(page.value);
            if out.len() >= MAX_FOLDERS {
                out.truncate(MAX_FOLDERS);
                return Ok(());
            }
            next = page
                .next_link
                .map(|l| self.client.endpoints().next_link(&l))
                .transpose()?;
        }
        Ok(())
    }

    fn with_query(mut url: reqwest::Url, pairs: &[(&str, &str)]) -> reqwest::Url {
        url.query_pairs_mut().extend_pairs(pairs);
        url
    }

    /// The folder's own record (resolves a well-known name to its id; `NotFound` if absent).
    async fn folder(&self, selector: &FolderSelector) -> Result<Folder, BackendError> {
        let url = Self::with_query(
            self.url(&["mailFolders", endpoints::folder(selector)?]),
            &[("$select", wire::FOLDER_FIELDS)],
        );
        self.get_json(url, Self::deadline()).await
    }

    async fn attachment_list(&self, message_id: &str) -> Result<Vec<Attachment>, BackendError> {
        let url = Self::with_query(
            self.url(&["messages", endpoints::segment(message_id)?, "attachments"]),
            &[("$select", wire::ATTACHMENT_FIELDS)],
        );
        let page: Collection<Attachment> = self.get_json(url, Self::deadline()).await?;
        Ok(page.value)
    }

    /// Moves or copies each message (`verb` is `move` or `copy`) after checking the destination
    /// exists; results in the order of `ids`.
    async fn relocate(
        &self,
        verb: &'static str,
        ids: &[String],
        destination: &FolderSelector,
    ) -> Result<Vec<ItemResult<String>>, BackendError> {
        let target = self.folder(destination).await?.id;
        // The mailbox gate bounds how many run at once; join_all keeps the order of `ids`.
        Ok(
            futures::future::join_all(ids.iter().map(|id| self.relocate_one(verb, id, &target)))
                .await,
        )
    }

    async fn relocate_one(&self, verb: &'static str, id: &str, target: &str) -> ItemResult<String> {
        let url = self.url(&["messages", endpoints::segment(id)?, verb]);
        let req = Request::change(
            Method::POST,
            url,
            Body::Json(serde_json::json!({ "destinationId": target })),
            Repeat::OnlyIfUnprocessed,
        );
        let moved: Message = self
            .client
            .json(self.gate(), &req, Self::deadline())
            .await?;
        Ok(moved.id)
    }

    /// The texts of `wanted[i]` for each `i` of `batch`, in one `$batch` request: a body step
    /// per message and an attachment-list step for those whose summary says they have any.
    /// The steps form [`MAX_CONCURRENT_PER_MAILBOX`] `dependsOn` chains, so Graph runs no more
    /// at once for this mailbox than a caller of single requests could.
    async fn text_batch(
        &self,
        wanted: &[&MessageSummary],
        batch: &[usize],
        deadline: Instant,
    ) -> Vec<Result<MessageText, BackendError>> {
        let endpoints = self.client.endpoints();
        let mut steps: Vec<serde_json::Value> = Vec::new();
        let mut planned: Vec<Option<(String, Option<String>)>> = Vec::new();
        let step = |url: reqwest::Url, text: bool, steps: &mut Vec<serde_json::Value>| {
            let id = steps.len().to_string();
            let prefer = if text {
                "IdType=\"ImmutableId\", outlook.body-content-type=\"text\""
            } else {
                "IdType=\"ImmutableId\""
            };
            let mut value = serde_json::json!({
                "id": id,
                "method": "GET",
                "url": endpoints.relative(&url),
                "headers": { "Prefer": prefer },
            });
            if let Some(before) = steps.len().checked_sub(MAX_CONCURRENT_PER_MAILBOX) {
                value["dependsOn"] = serde_json::json!([before.to_string()]);
            }
            steps.push(value);
            id
        };
        for &i in batch {
            let Ok(segment) = endpoints::segment(&wanted[i].id) else {
                planned.push(None);
                continue;
            };
            let body = Self::with_query(
                self.url(&["messages", segment]),
                &[("$select", "id,body,hasAttachments")],
            );
            let body_step = step(body, true, &mut steps);
            let list_step = wanted[i].has_attachments.then(|| {
                let url = Self::with_query(
                    self.url(&["messages", segment, "attachments"]),
                    &[("$select", wire::ATTACHMENT_FIELDS)],
                );
                step(url, false, &mut steps)
            });
            planned.push(Some((body_step, list_step)));
        }
        let req = Request::change(
            Method::POST,
            endpoints.batch(),
            Body::Json(serde_json::json!({ "requests": steps })),
            Repeat::Safe,
        );
        let answer: Result<wire::BatchResponse, BackendError> =
            self.client.json(self.gate(), &req, deadline).await;
        let mut by_id: std::collections::HashMap<String, wire::BatchStep> = match answer {
            Ok(answer) => answer
                .responses
                .into_iter()
                .map(|r| (r.id.clone(), r))
                .collect(),
            Err(e) => {
                return batch.iter().map(|_| Err(e.same_class())).collect();
            }
        };
        let mut take = |id: &str| -> Result<serde_json::Value, BackendError> {
            let step = by_id.remove(id).ok_or(BackendError::Malformed)?;
            match reqwest::StatusCode::from_u16(step.status) {
                Ok(s) if s.is_success() => Ok(step.body),
                Ok(s) => Err(client::classify(s)),
                Err(_) => Err(BackendError::Malformed),
            }
        };
        planned
            .into_iter()
            .map(|plan| {
                let (body_step, list_step) = plan.ok_or(BackendError::BadId)?;
                let message: Message = serde_json::from_value(take(&body_step)?)
                    .map_err(|_| BackendError::Malformed)?;
                let attachments = match list_step {
                    Some(id) => serde_json::from_value::<Collection<Attachment>>(take(&id)?)
                        .map_err(|_| BackendError::Malformed)?
                        .value
                        .into_iter()
                        .map(Attachment::into_meta)
                        .collect(),
                    None => Vec::new(),
                };
                Ok(message.into_text(attachments))
            })
            .collect()
    }

    async fn mark_one(&self, id: &str, read: bool) -> ItemResult<()> {
        let req = Request::change(
            Method::PATCH,
            self.url(&["messages", endpoints::segment(id)?]),
            Body::Json(serde_json::json!({ "isRead": read })),
            Repeat::Safe,
        );
        self.client
            .exchange(self.gate(), &req, Self::deadline())
            .await
            .map(drop)
    }
}

impl MailStore for GraphStore {
    fn keeps_categories(&self) -> bool {
        true
    }

    async fn categories(&self) -> Result<super::Categories, BackendError> {
        let url = self.url(&["outlook", "masterCategories"]);
        let page: Collection<Category> = self.get_json(url, Self::deadline()).await?;
        Ok(super::Categories::Listed(
            page.value
                .into_iter()
                .filter_map(|c| c.display_name.filter(|n| !n.trim().is_empty()))
                .collect(),
        ))
    }

    /// Contacts when there is no query; with one, Graph's people search (the people the user
    /// corresponds with, contacts included, matched by Graph).
    async fn address_book(
        &self,
        query: Option<&str>,
        limit: usize,
    ) -> Result<Option<Vec<super::Contact>>, BackendError> {
        let top = limit.clamp(1, 100).to_string();
        let contact = |name: Option<String>, address: Option<String>| {
            address
                .filter(|a| !a.trim().is_empty())
                .map(|address| super::Contact {
                    name: name.filter(|n| !n.trim().is_empty()),
                    address,
                })
        };
        let found: Vec<super::Contact> = match query {
            Some(q) => {
                // The query is one quoted phrase: quotes and backslashes cannot leave it.
                let phrase: String = q.chars().filter(|c| !matches!(c, '"' | '\\')).collect();
                let url = Self::with_query(
                    self.url(&["people"]),
                    &[("$search", &format!("\"{phrase}\"")), ("$top", &top)],
                );
                let page: Collection<Person> = self.get_json(url, Self::deadline()).await?;
                page.value
                    .into_iter()
                    .flat_map(|p| {
                        let name = p.display_name;
                        p.scored_email_addresses
                            .into_iter()
                            .filter_map(move |a| contact(name.clone(), a.address))
                    })
                    .collect()
            }
            None => {
                let url = Self::with_query(
                    self.url(&["contacts"]),
                    &[("$select", "displayName,emailAddresses"), ("$top", &top)],
                );
                let page: Collection<ContactItem> = self.get_json(url, Self::deadline()).await?;
                page.value
                    .into_iter()
                    .flat_map(|c| {
                        let name = c.display_name;
                        c.email_addresses
                            .into_iter()
                            .filter_map(move |a| contact(a.name.or(name.clone()), a.address))
                    })
                    .collect()
            }
        };
        Ok(Some(found.into_iter().take(limit).collect()))
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            search: SearchKind::RemoteRelevance,
            ids_survive_move: true,
        }
    }

    async fn list_folders(&self) -> Result<Vec<FolderInfo>, BackendError> {
        let deadline = Self::deadline();
        let select = [("$select", wire::FOLDER_FIELDS), ("$top", "100")];
        let mut all = Vec::new();
        self.folder_pages(
            Self::with_query(self.url(&["mailFolders"]), &select),
            &mut all,
            deadline,
        )
        .await?;
        // Breadth-first through folders that say they have children.
        let mut level: Vec<String> = all
            .iter()
            .filter(|f| f.child_folder_count > 0)
            .map(|f| f.id.clone())
            .collect();
        for _ in 0..MAX_FOLDER_DEPTH {
            let mut next_level = Vec::new();
            for parent in level {
                let mut children = Vec::new();
                let url = Self::with_query(
                    self.url(&["mailFolders", endpoints::segment(&parent)?, "childFolders"]),
                    &select,
                );
                self.folder_pages(url, &mut children, deadline).await?;
                next_level.extend(
                    children
                        .iter()
                        .filter(|f| f.child_folder_count > 0)
                        .map(|f| f.id.clone()),
                );
                all.extend(children);
                if all.len() >= MAX_FOLDERS {
                    break;
                }
            }
            if next_level.is_empty() || all.len() >= MAX_FOLDERS {
                break;
            }
            level = next_level;
        }
        all.truncate(MAX_FOLDERS);
        Ok(all.into_iter().map(Folder::into_info).collect())
    }

    async fn folder_stats(
        &self,
        folder: &FolderSelector,
        max_items: usize,
    ) -> Result<FolderStats, BackendError> {
        let deadline = Self::deadline();
        let info = self.folder(folder).await?.into_info();
        let top = max_items.clamp(1, PAGE_SIZE).to_string();
        let mut next = Some(Self::with_query(
            self.url(&["mailFolders", endpoints::segment(&info.id)?, "messages"]),
            &[
                ("$select", "id,hasAttachments,receivedDateTime"),
                ("$top", &top),
                ("$orderby", "receivedDateTime desc"),
            ],
        ));
        let mut stats = FolderStats {
            folder: info,
            with_attachments: 0,
            oldest: None,
            newest: None,
            messages_scanned: 0,
            messages_not_read: 0,
            pages_scanned: 0,
            truncated: false,
        };
        while let Some(url) = next.take() {
            let page: Collection<serde_json::Value> = self.get_json(url, deadline).await?;
            stats.pages_scanned += 1;
            for item in page.value {
                if stats.messages_scanned as usize >= max_items {
                    stats.truncated = true;
                    break;
                }
                stats.messages_scanned += 1;
                match serde_json::from_value::<Message>(item) {
                    Ok(mut m) => {
                        let s = m.summary("");
                        stats.with_attachments += u64::from(s.has_attachments);
                        if let Some(at) = s.received {
                            stats.oldest = Some(stats.oldest.map_or(at, |o| o.min(at)));
                            stats.newest = Some(stats.newest.map_or(at, |n| n.max(at)));
                        }
                    }
                    Err(_) => stats.messages_not_read += 1,
                }
            }
            if stats.truncated {
                break;
            }
            next = page
                .next_link
                .map(|l| self.client.endpoints().next_link(&l))
                .transpose()?;
            if next.is_some() && stats.messages_scanned as usize >= max_items {
                stats.truncated = true;
                break;
            }
        }
        Ok(stats)
    }

    async fn scan(&self, req: &ScanRequest, query: Option<&str>) -> Result<Page, BackendError> {
        let folder_segment = endpoints::folder(&req.folder)?;
        let window = req.budget.max_items.max(1);
        let top = window.min(PAGE_SIZE).to_string();
        let mut pairs: Vec<(&str, String)> =
            vec![("$select", wire::SUMMARY_FIELDS.to_owned()), ("$top", top)];
        match query {
            Some(q) => match endpoints::search_expression(q) {
                Some(expression) => pairs.push(("$search", expression)),
                // No word to search for: nothing can match.
                None => return Ok(Page::default()),
            },
            None => {
                let (filter, orderby) = endpoints::listing_query(&req.filters, req.order);
                pairs.extend(filter.map(|f| ("$filter", f)));
                pairs.extend(orderby.map(|o| ("$orderby", o)));
            }
        }
        let mut first = self.url(&["mailFolders", folder_segment, "messages"]);
        first
            .query_pairs_mut()
            .extend_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())));

        let deadline = req.budget.deadline;
        let mut page = Page {
            page_size: Some(window.min(PAGE_SIZE)),
            ..Page::default()
        };
        let mut next = Some(first);
        let mut exhausted = true;
        while let Some(url) = next.take() {
            if Instant::now() >= deadline {
                (page.timed_out, page.stop, exhausted) = (true, Some(ScanStop::Deadline), false);
                break;
            }
            if page.pages_scanned >= req.budget.max_pages {
                (page.stop, exhausted) = (Some(ScanStop::Pages), false);
                break;
            }
            let batch: Collection<serde_json::Value> = match self.get_json(url, deadline).await {
                Ok(batch) => batch,
                // Nothing examined yet: the search itself failed.
                Err(e) if page.pages_scanned == 0 => return Err(e),
                Err(e) => {
                    let timed_out = matches!(e, BackendError::Timeout);
                    page.timed_out = timed_out;
                    page.stop = Some(if timed_out {
                        ScanStop::Deadline
                    } else {
                        ScanStop::Fault(e.fault())
                    });
                    exhausted = false;
                    break;
                }
            };
            page.pages_scanned += 1;
            let mut left_in_page = false;
            for item in batch.value {
                if page.examined >= window {
                    left_in_page = true;
                    break;
                }
                page.examined += 1;
                match serde_json::from_value::<Message>(item) {
                    Ok(mut m) => {
                        let s = m.summary(folder_segment);
                        if req.filters.matches(&s) {
                            page.matched += 1;
                            page.items.push(s);
                        }
                    }
                    Err(_) => page.gaps.add(ContentGap::Unreadable),
                }
            }
            let link = match batch.next_link {
                Some(l) => match self.client.endpoints().next_link(&l) {
                    Ok(url) => Some(url),
                    Err(e) => {
                        page.stop = Some(ScanStop::Fault(e.fault()));
                        exhausted = false;
                        break;
                    }
                },
                None => None,
            };
            if left_in_page || (link.is_some() && page.examined >= window) {
                (page.stop, exhausted) = (Some(ScanStop::Window), false);
                break;
            }
            next = link;
        }
        // Graph ends a `$search` at 1,000 results without saying more matched.
        if exhausted && query.is_some() && page.examined >= SEARCH_RESULT_CAP {
            (page.stop, exhausted) = (Some(ScanStop::ServerCap), false);
        }
        page.truncated = !exhausted;
        page.items.sort_by(|a, b| req.order.compare(a, b));
        page.items.truncate(req.keep);
        Ok(page)
    }

    async fn get_message(&self, id: &str) -> Result<MessageDetail, BackendError> {
        let segment = endpoints::segment(id)?;
        let mut req = Request::get(Self::with_query(
            self.url(&["messages", segment]),
            &[("$select", wire::DETAIL_FIELDS)],
        ));
        req.text_body = true;
        let deadline = Self::deadline();
        let (message, attachments) = futures::join!(
            self.client.json::<Message>(self.gate(), &req, deadline),
            self.attachment_list(id)
        );
        let message = message?;
        let attachments = if message.has_attachments {
            attachments?
                .into_iter()
                .map(Attachment::into_meta)
                .collect()
        } else {
            Vec::new()
        };
        Ok(message.into_detail(attachments))
    }

    /// One `$batch` request per twenty steps instead of two requests per message: a search's
    /// fallback reads dozens of bodies, and each round trip costs the caller (issue 11's
    /// benchmark). Batches run one after another, so this mailbox never has more than
    /// [`MAX_CONCURRENT_PER_MAILBOX`] steps running at once.
    async fn texts(
        &self,
        wanted: &[&MessageSummary],
        deadline: Instant,
    ) -> Vec<Result<MessageText, BackendError>> {
        let mut batches: Vec<Vec<usize>> = Vec::new();
        let mut steps = 0;
        for (i, m) in wanted.iter().enumerate() {
            let need = 1 + usize::from(m.has_attachments);
            match batches.last_mut() {
                Some(batch) if steps + need <= BATCH_STEPS => batch.push(i),
                _ => {
                    batches.push(vec![i]);
                    steps = 0;
                }
            }
            steps += need;
        }
        let mut results = Vec::with_capacity(wanted.len());
        for batch in &batches {
            if Instant::now() >= deadline {
                results.extend(batch.iter().map(|_| Err(BackendError::Timeout)));
                continue;
            }
            results.extend(self.text_batch(wanted, batch, deadline).await);
        }
        results
    }

    async fn list_attachments(
        &self,
        message_id: &str,
    ) -> Result<Vec<AttachmentMeta>, BackendError> {
        Ok(self
            .attachment_list(message_id)
            .await?
            .into_iter()
            .map(Attachment::into_meta)
            .collect())
    }

    async fn attachment(
        &self,
        message_id: &str,
        attachment_id: &str,
        max_bytes: u64,
    ) -> Result<(AttachmentMeta, Vec<u8>), BackendError> {
        let segments = [
            "messages",
            endpoints::segment(message_id)?,
            "attachments",
            endpoints::segment(attachment_id)?,
        ];
        let deadline = Self::deadline();
        let attachment: Attachment = self
            .get_json(
                Self::with_query(self.url(&segments), &[("$select", wire::ATTACHMENT_FIELDS)]),
                deadline,
            )
            .await?;
        if attachment.kind() == AttachmentKind::Reference {
            // A link to a file elsewhere (OneDrive, SharePoint): no bytes in the mailbox.
            return Err(BackendError::Unsupported("graph"));
        }
        if attachment.size > max_bytes {
            return Err(BackendError::TooLarge);
        }
        let mut value = segments.to_vec();
        value.push("$value");
        let mut req = Request::get(self.url(&value));
        req.max_bytes = max_bytes;
        let bytes = self.client.exchange(self.gate(), &req, deadline).await?;
        Ok((attachment.into_meta(), bytes))
    }

    /// Graph's own id of the folder, as it names it in every message's `parentFolderId` (what
    /// a listing's `folder_id` carries): a well-known name is resolved, and an id is checked
    /// and returned in the form Graph gives it back.
    async fn resolve_folder(&self, folder: &FolderSelector) -> Result<String, BackendError> {
        Ok(self.folder(folder).await?.id)
    }

    async fn folder_changes(
        &self,
        folder_id: &str,
        cursor: Option<&str>,
    ) -> Result<FolderSync, BackendError> {
        self.changes_of(folder_id, cursor).await
    }

    // `index_fetch` keeps the trait's default (one message read, then each picked attachment's
    // `$value`): `$expand=attachments` would pull every attachment's bytes inline, the large
    // ones the index does not want included.
}

impl MailWrite for GraphStore {
    async fn append(
        &self,
        folder: WellKnown,
        raw: &[u8],
        _flags: Flags,
    ) -> Result<String, BackendError> {
        // Graph files a MIME upload in Drafts; the Sent copy is sendMail's own.
        if folder != WellKnown::Drafts {
            return Err(BackendError::Unsupported("graph"));
        }
        let req = Request::change(
            Method::POST,
            self.url(&["messages"]),
            Body::Mime(raw.to_vec()),
            Repeat::OnlyIfUnprocessed,
        );
        let created: Message = self
            .client
            .json(self.gate(), &req, Self::deadline())
            .await?;
        Ok(created.id)
    }

    async fn move_messages(
        &self,
        ids: &[String],
        destination: &FolderSelector,
    ) -> Result<Vec<ItemResult<String>>, BackendError> {
        self.relocate("move", ids, destination).await
    }

    async fn copy_messages(
        &self,
        ids: &[String],
        destination: &FolderSelector,
    ) -> Result<Vec<ItemResult<String>>, BackendError> {
        self.relocate("copy", ids, destination).await
    }

    async fn mark_messages(
        &self,
        ids: &[String],
        read: bool,
    ) -> Result<Vec<ItemResult<()>>, BackendError> {
        Ok(futures::future::join_all(ids.iter().map(|id| self.mark_one(id, read))).await)
    }
}

/// Sends through Graph's `sendMail` as the permit's pinned sender. Graph saves the Sent copy.
pub(crate) struct GraphSender {
    client: Arc<GraphClient>,
    gate: AccountLimits,
}

/// Why a Graph send failed, as a class.
#[derive(Debug, thiserror::Error)]
#[error("Microsoft Graph did not accept the message: {0}")]
pub(crate) struct GraphSendError(#[source] pub(crate) BackendError);

impl GraphSender {
    pub(crate) fn new(client: Arc<GraphClient>) -> Self {
        Self {
            client,
            gate: AccountLimits::in_process(1),
        }
    }

    /// One submission of exactly what the permit holds, recipients taken from its headers (Bcc
    /// included: Graph reads recipients from the MIME headers). Repeated only after a 429 or
    /// 401, which Graph answers before accepting anything.
    pub(crate) async fn send(&self, permit: SendPermit) -> Result<SentMessage, GraphSendError> {
        let url = self
            .client
            .endpoints()
            .user(permit.envelope_from().as_str(), &["sendMail"]);
        let req = Request::change(
            Method::POST,
            url,
            Body::Mime(permit.header_addressed_bytes().to_vec()),
            Repeat::OnlyIfUnprocessed,
        );
        self.client
            .exchange(&self.gate, &req, Instant::now() + OPERATION_DEADLINE)
            .await
            .map_err(GraphSendError)?;
        Ok(permit.into_sent())
    }
}

#[cfg(test)]
mod tests;
