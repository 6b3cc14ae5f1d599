//! The embedded Maildir++ backend: a mailbox is a directory opened once, at startup, as a cap-std
//! [`Dir`]; every later access is relative to it, so no id, folder name or file name from a caller
//! or a message can reach outside it.
//!
//! Layout: the root holds `cur/ new/ tmp/` (the inbox); each subfolder is a `.Name` directory
//! with its own `cur/ new/ tmp/`, nested folders joined by dots (`.Projects.Alpha`). Flags live in
//! the file name (`unique:2,FRS`). Files whose names start with a dot and Dovecot's index files are
//! ignored. Message ids are opaque: the folder and the unique part of the file name, base64url
//! encoded, and only ever resolved by listing the folder (never by joining the id onto a path).
//!
//! The filesystem API is synchronous, so every operation runs on the blocking pool.

use std::io::Read;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use cap_std::fs::Dir;
use chrono::{DateTime, Utc};

use super::{AttachmentMeta, BackendError, FolderInfo, FolderStats, MessageDetail};
use crate::mime::{self, ParsedMessage};
use crate::search::matcher::tokens;
use crate::search::{Candidate, Page, ScanRequest};

/// The inbox's folder id.
pub(crate) const INBOX: &str = "INBOX";
/// Messages read per page of a scan; the page is the unit `maxPages` counts.
const PAGE_SIZE: usize = 50;
/// Largest message file the backend reads; bigger files are skipped as over a limit.
const MAX_MESSAGE_BYTES: u64 = 64 * 1024 * 1024;
/// Body characters kept for the local scan's matching.
const MATCH_BODY_CHARS: usize = 65_536;
const PREVIEW_CHARS: usize = 500;

pub(crate) struct MaildirStore {
    root: Arc<Dir>,
}

/// One message file found in a folder listing.
#[derive(Clone, Debug)]
struct MessageFile {
    sub: &'static str,
    file_name: String,
    unique: String,
    flags: String,
    received: i64,
}

impl MessageFile {
    fn is_seen(&self) -> bool {
        self.flags.contains('S')
    }
}

impl MaildirStore {
    pub(crate) fn new(root: Dir) -> Self {
        Self {
            root: Arc::new(root),
        }
    }

    async fn blocking<T, F>(&self, f: F) -> Result<T, BackendError>
    where
        T: Send + 'static,
        F: FnOnce(&Dir) -> Result<T, BackendError> + Send + 'static,
    {
        let root = Arc::clone(&self.root);
        tokio::task::spawn_blocking(move || f(&root))
            .await
            .map_err(|_| BackendError::Io(std::io::Error::other("maildir worker stopped")))?
    }

    pub(crate) async fn list_folders(&self) -> Result<Vec<FolderInfo>, BackendError> {
        self.blocking(|root| {
            let ids = discover_folders(root)?;
            let mut out = Vec::with_capacity(ids.len());
            for id in &ids {
                let dir = folder_dir(root, id)?;
                let files = list_files(&dir)?;
                let unread = files.iter().filter(|f| !f.is_seen()).count() as u64;
                let (name, parent_id) = match id.rsplit_once('.') {
                    Some((parent, leaf)) if ids.iter().any(|i| i == parent) => {
                        (leaf.to_owned(), Some(parent.to_owned()))
                    }
                    _ if id == INBOX => ("Inbox".to_owned(), None),
                    _ => (id.clone(), None),
                };
                out.push(FolderInfo {
                    id: id.clone(),
                    name,
                    parent_id,
                    total: files.len() as u64,
                    unread,
                });
            }
            Ok(out)
        })
        .await
    }

    pub(crate) async fn folder_stats(
        &self,
        folder: &str,
        max_items: usize,
    ) -> Result<FolderStats, BackendError> {
        let folder = folder.to_owned();
        self.blocking(move |root| {
            let id = resolve_folder(root, Some(&folder))?;
            let dir = folder_dir(root, &id)?;
            let files = list_files(&dir)?;
            let unread = files.iter().filter(|f| !f.is_seen()).count() as u64;
            let mut with_attachments = 0;
            let scanned = files.len().min(max_items);
            for file in files.iter().take(scanned) {
                if let Ok(raw) = read_file(&dir, file)
                    && !mime::parse(&raw).attachments.iter().all(|a| a.is_inline)
                {
                    with_attachments += 1;
                }
            }
            let window = &files[..scanned];
            let newest = window
                .iter()
                .map(|f| f.received)
                .max()
                .and_then(secs_to_utc);
            let oldest = window
                .iter()
                .map(|f| f.received)
                .min()
                .and_then(secs_to_utc);
            let name = if id == INBOX {
                "Inbox".to_owned()
            } else {
                id.clone()
            };
            Ok(FolderStats {
                folder: FolderInfo {
                    id: id.clone(),
                    name,
                    parent_id: None,
                    total: files.len() as u64,
                    unread,
                },
                with_attachments,
                oldest,
                newest,
                messages_scanned: scanned as u64,
                pages_scanned: scanned.div_ceil(PAGE_SIZE).max(1) as u32,
                truncated: files.len() > scanned,
            })
        })
        .await
    }

    /// A bounded, newest-first scan of one folder. With `query`, this is the backend's own
    /// relevance search: every query word must occur (case- and accent-insensitive substring)
    /// in the subject, sender, body or an attachment name.
    pub(crate) async fn scan(
        &self,
        req: &ScanRequest,
        query: Option<&str>,
    ) -> Result<Page, BackendError> {
        let req = req.clone();
        let words: Option<Vec<String>> = query.map(tokens);
        self.blocking(move |root| {
            let id = resolve_folder(root, req.folder.as_deref())?;
            let dir = folder_dir(root, &id)?;
            let files = list_files(&dir)?;
            let mut page = Page::default();
            let mut next = 0;
            while next < files.len() {
                if page.pages_scanned >= req.max_pages || page.items.len() >= req.max_items {
                    page.truncated = true;
                    break;
                }
                page.pages_scanned += 1;
                let end = (next + PAGE_SIZE).min(files.len());
                for file in &files[next..end] {
                    if page.items.len() >= req.max_items {
                        // Stopped inside a page with items left over.
                        page.truncated = true;
                        break;
                    }
                    let Ok(raw) = read_file(&dir, file) else {
                        continue;
                    };
                    let parsed = mime::parse(&raw);
                    let candidate = to_candidate(&id, file, &parsed);
                    if !req.filters.matches(&candidate) {
                        continue;
                    }
                    if let Some(words) = &words
                        && !contains_all(&candidate, words)
                    {
                        continue;
                    }
                    page.items.push(candidate);
                }
                if page.truncated {
                    break;
                }
                next = end;
            }
            Ok(page)
        })
        .await
    }

    pub(crate) async fn get_message(&self, id: &str) -> Result<MessageDetail, BackendError> {
        let id = id.to_owned();
        self.blocking(move |root| {
            let (folder, dir, file) = locate(root, &id)?;
            let raw = read_file(&dir, &file)?;
            let parsed = mime::parse(&raw);
            let summary = to_candidate(&folder, &file, &parsed);
            Ok(MessageDetail {
                summary,
                to: parsed.to,
                cc: parsed.cc,
                body_text: parsed.body_text,
                body_is_html: parsed.body_is_html,
                internet_message_id: parsed.message_id,
                in_reply_to: parsed.in_reply_to,
            })
        })
        .await
    }

    pub(crate) async fn list_attachments(
        &self,
        message_id: &str,
    ) -> Result<Vec<AttachmentMeta>, BackendError> {
        let id = message_id.to_owned();
        self.blocking(move |root| {
            let (_, dir, file) = locate(root, &id)?;
            let raw = read_file(&dir, &file)?;
            Ok(attachment_metas(&mime::parse(&raw)))
        })
        .await
    }

    pub(crate) async fn attachment(
        &self,
        message_id: &str,
        attachment_id: &str,
        max_bytes: u64,
    ) -> Result<(AttachmentMeta, Vec<u8>), BackendError> {
        let id = message_id.to_owned();
        let index = parse_attachment_id(attachment_id)?;
        self.blocking(move |root| {
            let (_, dir, file) = locate(root, &id)?;
            let raw = read_file(&dir, &file)?;
            // One parse yields both the metadata and the decoded bytes.
            let (parsed, bytes) = mime::parse_with_attachment(&raw, index);
            let meta = attachment_metas(&parsed)
                .into_iter()
                .nth(index)
                .ok_or(BackendError::NotFound)?;
            if meta.size > max_bytes {
                return Err(BackendError::TooLarge);
            }
            let bytes = bytes.ok_or(BackendError::NotFound)?;
            if bytes.len() as u64 != meta.size || bytes.len() as u64 > max_bytes {
                return Err(BackendError::TooLarge);
            }
            Ok((meta, bytes))
        })
        .await
    }
}

fn secs_to_utc(secs: i64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(secs, 0)
}

fn attachment_id(index: usize) -> String {
    format!("att-{index}")
}

fn parse_attachment_id(id: &str) -> Result<usize, BackendError> {
    id.strip_prefix("att-")
        .filter(|n| !n.is_empty() && n.len() <= 6 && n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.parse().ok())
        .ok_or(BackendError::BadId)
}

fn attachment_metas(parsed: &ParsedMessage) -> Vec<AttachmentMeta> {
    parsed
        .attachments
        .iter()
        .map(|a| AttachmentMeta {
            id: attachment_id(a.index),
            name: a.name.clone(),
            content_type: a.content_type.clone(),
            size: a.size,
            is_inline: a.is_inline,
        })
        .collect()
}

fn to_candidate(folder: &str, file: &MessageFile, parsed: &ParsedMessage) -> Candidate {
    let attachments = attachment_metas(parsed);
    Candidate {
        id: encode_id(folder, &file.unique),
        folder_id: folder.to_owned(),
        subject: parsed.subject.clone(),
        from: parsed.from.first().cloned(),
        received: secs_to_utc(file.received).or(parsed.date),
        sent: parsed.date,
        is_read: file.is_seen(),
        is_flagged: file.flags.contains('F'),
        is_answered: file.flags.contains('R'),
        has_attachments: attachments.iter().any(|a| !a.is_inline),
        preview: parsed.body_text.chars().take(PREVIEW_CHARS).collect(),
        body: parsed.body_text.chars().take(MATCH_BODY_CHARS).collect(),
        attachments,
    }
}

/// The backend's substring search over folded words.
fn contains_all(c: &Candidate, words: &[String]) -> bool {
    if words.is_empty() {
        return false;
    }
    let mut hay = String::new();
    for part in [c.subject.as_deref().unwrap_or(""), &c.body] {
        hay.push_str(&tokens(part).join(" "));
        hay.push(' ');
    }
    if let Some(from) = &c.from {
        for part in [from.address.as_deref(), from.name.as_deref()]
            .into_iter()
            .flatten()
        {
            hay.push_str(&tokens(part).join(" "));
            hay.push(' ');
        }
    }
    for a in &c.attachments {
        if let Some(n) = &a.name {
            hay.push_str(&tokens(n).join(" "));
            hay.push(' ');
        }
    }
    words.iter().all(|w| hay.contains(w.as_str()))
}

pub(crate) fn encode_id(folder: &str, unique: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{folder}\n{unique}"))
}

fn decode_id(id: &str) -> Result<(String, String), BackendError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(id)
        .map_err(|_| BackendError::BadId)?;
    let text = String::from_utf8(bytes).map_err(|_| BackendError::BadId)?;
    let (folder, unique) = text.split_once('\n').ok_or(BackendError::BadId)?;
    if !valid_folder_id(folder) || !valid_unique(unique) {
        return Err(BackendError::BadId);
    }
    Ok((folder.to_owned(), unique.to_owned()))
}

fn valid_folder_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 255
        && !id.starts_with('.')
        && !id.ends_with('.')
        && !id.contains("..")
        && !id.chars().any(|c| c == '/' || c == '\\' || c.is_control())
}

fn valid_unique(unique: &str) -> bool {
    !unique.is_empty()
        && unique.len() <= 255
        && !unique.starts_with('.')
        && !unique
            .chars()
            .any(|c| c == '/' || c == '\\' || c == ':' || c.is_control())
}

/// Folder ids present: the inbox (when the root is a Maildir) and every `.Name` directory that
/// holds a `cur/`.
fn discover_folders(root: &Dir) -> Result<Vec<String>, BackendError> {
    let mut ids = Vec::new();
    if root.is_dir("cur") {
        ids.push(INBOX.to_owned());
    }
    let mut others = Vec::new();
    for entry in root.entries()? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let Some(id) = name.strip_prefix('.') else {
            continue;
        };
        if !valid_folder_id(id) || !entry.file_type()?.is_dir() {
            continue;
        }
        if root.is_dir(format!("{name}/cur")) {
            others.push(id.to_owned());
        }
    }
    others.sort();
    ids.extend(others);
    Ok(ids)
}

/// Maps a caller's folder (None = inbox, a well-known name, or an id) to a folder that exists.
fn resolve_folder(root: &Dir, requested: Option<&str>) -> Result<String, BackendError> {
    let ids = discover_folders(root)?;
    let wanted = requested.unwrap_or("inbox").trim();
    let well_known: &[&str] = match wanted.to_ascii_lowercase().as_str() {
        "inbox" => &[INBOX],
        "sentitems" | "sent" => &["Sent", "Sent Items", "Sent Messages"],
        "drafts" => &["Drafts"],
        "archive" => &["Archive"],
        "junkemail" | "junk" => &["Junk", "Spam"],
        "deleteditems" | "trash" => &["Trash", "Deleted Items"],
        _ => &[],
    };
    for candidate in well_known {
        if ids.iter().any(|i| i == candidate) {
            return Ok((*candidate).to_owned());
        }
    }
    if let Some(id) = ids.iter().find(|i| *i == wanted) {
        return Ok(id.clone());
    }
    ids.into_iter()
        .find(|i| i.eq_ignore_ascii_case(wanted))
        .ok_or(BackendError::NotFound)
}

fn folder_dir(root: &Dir, id: &str) -> Result<Dir, BackendError> {
    if id == INBOX {
        Ok(root.try_clone()?)
    } else if valid_folder_id(id) {
        Ok(root.open_dir(format!(".{id}"))?)
    } else {
        Err(BackendError::BadId)
    }
}

/// Message files of a folder, newest first (by the delivery time in the unique name, which
/// Maildir writers put first, falling back to the file's mtime).
fn list_files(dir: &Dir) -> Result<Vec<MessageFile>, BackendError> {
    let mut files = Vec::new();
    for sub in ["cur", "new"] {
        let Ok(entries) = dir.read_dir(sub) else {
            continue;
        };
        for entry in entries {
            let entry = entry?;
            let Ok(file_name) = entry.file_name().into_string() else {
                continue;
            };
            if file_name.starts_with('.') || !entry.file_type()?.is_file() {
                continue;
            }
            let (unique, flags) = match file_name.split_once(":2,") {
                Some((u, f)) => (u.to_owned(), f.to_owned()),
                None => (file_name.clone(), String::new()),
            };
            if !valid_unique(&unique) {
                continue;
            }
            let received = unique
                .split('.')
                .next()
                .and_then(|t| t.parse::<i64>().ok())
                .or_else(|| {
                    entry
                        .metadata()
                        .ok()
                        .and_then(|m| m.modified().ok())
                        .map(|t| DateTime::<Utc>::from(t.into_std()).timestamp())
                })
                .unwrap_or(0);
            // A message in new/ has not been seen by any client, whatever its name says.
            let flags = if sub == "new" { String::new() } else { flags };
            files.push(MessageFile {
                sub,
                file_name,
                unique,
                flags,
                received,
            });
        }
    }
    files.sort_by(|a, b| {
        b.received
            .cmp(&a.received)
            .then_with(|| a.unique.cmp(&b.unique))
    });
    Ok(files)
}

fn locate(root: &Dir, id: &str) -> Result<(String, Dir, MessageFile), BackendError> {
    let (folder, unique) = decode_id(id)?;
    let dir = folder_dir(root, &folder).map_err(|_| BackendError::NotFound)?;
    let file = list_files(&dir)?
        .into_iter()
        .find(|f| f.unique == unique)
        .ok_or(BackendError::NotFound)?;
    Ok((folder, dir, file))
}

fn read_file(dir: &Dir, file: &MessageFile) -> Result<Vec<u8>, BackendError> {
    let f = dir.open(format!("{}/{}", file.sub, file.file_name))?;
    let len = f.metadata()?.len();
    if len > MAX_MESSAGE_BYTES {
        return Err(BackendError::TooLarge);
    }
    let mut buf = Vec::with_capacity(len as usize);
    f.take(MAX_MESSAGE_BYTES).read_to_end(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_reject_traversal() {
        let id = encode_id("Projects.Alpha", "1767225600.M1P1.demo");
        assert_eq!(
            decode_id(&id).unwrap(),
            (
                "Projects.Alpha".to_owned(),
                "1767225600.M1P1.demo".to_owned()
            )
        );
        for (folder, unique) in [
            ("..", "x"),
            ("a/b", "x"),
            ("INBOX", "../x"),
            (".hidden", "x"),
        ] {
            assert!(
                decode_id(&encode_id(folder, unique)).is_err(),
                "{folder} {unique}"
            );
        }
        assert!(decode_id("not base64 !").is_err());
    }

    #[test]
    fn attachment_ids_are_strict() {
        assert_eq!(parse_attachment_id("att-3").unwrap(), 3);
        for bad in ["att-", "att--1", "att-1x", "3", "att-99999999"] {
            assert!(parse_attachment_id(bad).is_err(), "{bad}");
        }
    }
}
