//! `mailgate://{alias}/contacts{?query}`: a mailbox's correspondents. A backend with an address
//! book answers from it (Graph: contacts, or people search with a query); otherwise they are
//! derived from headers of a bounded window of recent mail — the senders of the newest
//! [`INBOX_WINDOW`] inbox messages and the To/Cc of the newest [`SENT_WINDOW`] sent ones — and
//! the answer says so (`source: "headers"`, `window`), since a correspondent outside the window
//! is not listed. The mailbox's own address is never listed. Everything here is untrusted.

use std::collections::HashMap;

use serde::Serialize;

use crate::backends::Contact;
use crate::search::{SearchPlan, SearchStatus, engine};
use crate::tools::output::{ADDRESS_CHARS, bounded};
use crate::tools::{Resolved, ToolError};

/// Inbox messages whose senders are read.
pub(crate) const INBOX_WINDOW: usize = 200;
/// Sent messages whose recipients are read (one message read each).
pub(crate) const SENT_WINDOW: usize = 25;
/// Contacts in one answer.
pub(crate) const MAX_CONTACTS: usize = 50;
const NAME_CHARS: usize = 200;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ContactsOut {
    mailbox: String,
    /// `addressBook` (the backend's own) or `headers` (derived from recent mail).
    source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    query: Option<String>,
    contacts: Vec<ContactOut>,
    /// More matched than are listed.
    truncated: bool,
    /// For `headers`: what was read, and that a correspondent outside it is not listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    window: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ContactOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    address: String,
    /// For `headers`: in how many of the window's messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    seen: Option<usize>,
}

pub(crate) async fn read(
    resolved: &Resolved<'_>,
    query: Option<&str>,
) -> Result<ContactsOut, ToolError> {
    let own = resolved.entry.address.as_str().to_lowercase();
    let query_lower = query.map(str::to_lowercase);
    let wanted = |c: &Contact| {
        let address = c.address.to_lowercase();
        address != own
            && query_lower.as_deref().is_none_or(|q| {
                address.contains(q)
                    || c.name
                        .as_ref()
                        .is_some_and(|n| n.to_lowercase().contains(q))
            })
    };
    let book = resolved
        .backend
        .address_book(query, MAX_CONTACTS + 1)
        .await?;
    let (source, found, window) = match book {
        Some(entries) => (
            "addressBook",
            entries
                .into_iter()
                .filter(|c| wanted(c))
                .map(|c| (c, None))
                .collect(),
            None,
        ),
        None => {
            let (seen, window) = from_headers(resolved).await?;
            let found: Vec<(Contact, Option<usize>)> = seen
                .into_iter()
                .filter(|(c, _)| wanted(c))
                .map(|(c, n)| (c, Some(n)))
                .collect();
            ("headers", found, Some(window))
        }
    };
    let truncated = found.len() > MAX_CONTACTS;
    Ok(ContactsOut {
        mailbox: resolved.alias.to_string(),
        source,
        query: query.map(str::to_owned),
        contacts: found
            .into_iter()
            .take(MAX_CONTACTS)
            .map(|(c, seen)| ContactOut {
                name: c.name.map(|n| bounded(&n, NAME_CHARS)),
                address: bounded(&c.address, ADDRESS_CHARS),
                seen,
            })
            .collect(),
        truncated,
        window,
    })
}

/// Correspondents of the recent window, most frequent first, and a sentence saying what the
/// window was (and what of it could not be read).
async fn from_headers(
    resolved: &Resolved<'_>,
) -> Result<(Vec<(Contact, usize)>, String), ToolError> {
    let backend = resolved.backend;
    let mut counts: HashMap<String, (Contact, usize)> = HashMap::new();
    let mut note = |c: Contact| {
        let key = c.address.to_lowercase();
        let entry = counts.entry(key).or_insert((
            Contact {
                name: None,
                address: c.address.clone(),
            },
            0,
        ));
        if entry.0.name.is_none() {
            entry.0.name = c.name.filter(|n| !n.trim().is_empty());
        }
        entry.1 += 1;
    };
    let listing = |folder: &str, n: usize| {
        let deadline = crate::tools::call_deadline(crate::search::SEARCH_DEADLINE);
        SearchPlan::newest(folder, n, 10, deadline, false)
    };
    let inbox = engine::run(backend, &listing("inbox", INBOX_WINDOW)).await;
    if matches!(
        inbox.status,
        SearchStatus::SearchFailed | SearchStatus::SearchUntrusted
    ) {
        return Err(ToolError::new(
            crate::tools::ErrorCode::BackendUnavailable,
            "the inbox could not be listed",
        ));
    }
    let inbox_read = inbox.messages.len();
    for m in inbox.messages {
        if let Some(from) = m.from
            && let Some(address) = from.address
        {
            note(Contact {
                name: from.name,
                address,
            });
        }
    }
    // A mailbox without a sent folder has senders only.
    let sent = engine::run(backend, &listing("sentitems", SENT_WINDOW)).await;
    let mut sent_read = 0;
    let mut sent_failed = 0;
    for chunk in sent.messages.chunks(crate::backends::FETCHES_AT_ONCE) {
        let details =
            futures::future::join_all(chunk.iter().map(|m| backend.get_message(&m.id))).await;
        for detail in details {
            match detail {
                Ok(d) => {
                    sent_read += 1;
                    for r in d.to.into_iter().chain(d.cc) {
                        if let Some(address) = r.address {
                            note(Contact {
                                name: r.name,
                                address,
                            });
                        }
                    }
                }
                Err(_) => sent_failed += 1,
            }
        }
    }
    let mut all: Vec<(Contact, usize)> = counts.into_values().collect();
    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.address.cmp(&b.0.address)));
    let mut window = format!(
        "derived from headers: the senders of the newest {inbox_read} inbox message(s) and the \
         To/Cc of the newest {sent_read} sent message(s) (at most {INBOX_WINDOW} and \
         {SENT_WINDOW}); a correspondent outside them is not listed"
    );
    if sent_failed > 0 {
        window.push_str(&format!(
            "; {sent_failed} sent message(s) could not be read"
        ));
    }
    Ok((all, window))
}
