//! The local index: per alias, a full-text index of the mailbox (and, with an embeddings
//! endpoint, its vectors), kept in sync with the backend by the operator's `mailgate index
//! sync`, and read by the server's searches with `source: "index" | "hybrid"`. The server reads
//! an index through [`store::ReadStore`], the closed set of stores (async, batched, with the
//! status and the vectors inside), over the neutral [`IndexQuery`] and [`CandidateQuery`];
//! [`TextIndex`] and [`TextIndexWriter`] are the local store's text index (tantivy) as `sync`
//! writes it over [`IndexedMessage`]. Everything of the local store lives in
//! `<state>/index/<alias>/` (private folders, opened through `path_guard`), and only the sync
//! process writes it: the server opens it read-only, never creates it, and never blocks on the
//! writer.

pub(crate) mod analyzer;
pub(crate) mod capdir;
pub(crate) mod layout;
pub(crate) mod reader;
pub(crate) mod state;
pub(crate) mod status;
pub(crate) mod store;
pub(crate) mod stored;
pub(crate) mod sync;
pub(crate) mod tantivy_index;

use crate::backends::model::{ContentGap, Filters, MessageSummary, Order};

/// A message's key in an index and its vectors: its folder and backend id (a backend whose ids
/// survive a move lists one id in two folders during a sync).
pub(crate) fn doc_key(folder_id: &str, id: &str) -> String {
    format!("{folder_id}\u{0}{id}")
}

/// One message as the index stores it: what a search matches on and what a summary shows.
/// Everything in it came from a message and is untrusted.
#[derive(Clone, Debug)]
pub(crate) struct IndexedMessage {
    /// The summary the search answers show (subject, from, flags, preview, attachments, gap).
    pub(crate) summary: MessageSummary,
    pub(crate) internet_message_id: Option<String>,
    /// The Message-ID, In-Reply-To and References ids: the thread the message belongs to.
    pub(crate) thread_ids: Vec<String>,
    /// To and Cc, names and addresses.
    pub(crate) recipients: Vec<String>,
    pub(crate) body: String,
    /// Text extracted from attachments (through the extraction worker and its caps). An
    /// attachment whose text could not be read adds nothing here; absence is proved on the
    /// fields the live search matches (subject, body, sender, attachment names), which the
    /// index always holds whole or marks with a content gap.
    pub(crate) attachment_text: String,
    /// Every listed attachment's text is wholly in `attachment_text` (none failed, was cut,
    /// skipped or has no extractor). When false, a search of attachment text must read the
    /// message's attachments itself before it may call a signal absent.
    pub(crate) attachments_whole: bool,
}

/// A search of one alias's index: the words (all must occur, in any indexed field), the folder,
/// the structured filters, and how many of the best matches to return in which order.
#[derive(Clone, Debug)]
pub(crate) struct IndexQuery {
    /// `None`: every folder.
    pub(crate) folder_id: Option<String>,
    pub(crate) words: Vec<String>,
    pub(crate) filters: Filters,
    pub(crate) limit: usize,
    /// `None`: by relevance (BM25 with field boosts, recency breaking ties).
    pub(crate) order: Option<Order>,
}

/// What makes a message a candidate of [`TextIndex::candidates`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Clue {
    /// A run of consecutive tokens of one field a document investigation matches (subject,
    /// sender, body, attachment names, attachment text) spells the text's tokens run together,
    /// breaking only where the text breaks or switches between letters and digits (`PROP-1001`
    /// finds `prop 1001`, `PROP1001`, `prop_1001`; not `pro p1001`). A text the index cannot
    /// narrow by (only punctuation, or a run too long to be an indexed token) yields every
    /// message.
    Text(String),
    /// The same, in the attachment names only.
    AttachmentName(String),
    /// The message's content is not wholly in the index (a content gap).
    Gap,
    /// Some attachment's text is not wholly in the index.
    UnreadAttachments,
}

/// The messages of one folder that may hold any of the clues, newest first: a superset of the
/// messages whose fields hold them as the investigation matches (tokens in order, on token
/// boundaries), which the caller then reads and matches itself.
#[derive(Clone, Debug)]
pub(crate) struct CandidateQuery {
    pub(crate) folder_id: String,
    pub(crate) clues: Vec<Clue>,
    pub(crate) limit: usize,
}

/// What the index answered.
#[derive(Clone, Debug, Default)]
pub(crate) struct IndexHits {
    /// The best `limit` matches, in order, with their relevance score (0 for ordered listings).
    pub(crate) hits: Vec<(MessageSummary, f32)>,
    /// Matches in all, returned or not: every one was looked at (the match is exhaustive).
    pub(crate) matched: usize,
    /// Messages in the scope (folder), matching or not.
    pub(crate) in_scope: usize,
    /// Messages of the scope whose content is not wholly in the index, by kind: a non-match
    /// among them proves nothing.
    pub(crate) gaps: Vec<(ContentGap, usize)>,
}

/// Why the index could not answer or be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum IndexError {
    #[error("the index has no data for this mailbox yet")]
    Missing,
    #[error("the index is being written by another sync")]
    Busy,
    #[error("the index could not be read or written ({0})")]
    Store(String),
    #[error("the sync state could not be read or written ({0})")]
    State(String),
    /// Built by another version of the text analysis or layout: its tokens are not this
    /// version's, so it is never served; `index sync` rebuilds it.
    #[error("the index was built by another version of mailgate's text analysis: rebuild it")]
    Outdated,
    #[error("the index folder is refused ({0})")]
    Folder(String),
}

impl From<tantivy::TantivyError> for IndexError {
    fn from(e: tantivy::TantivyError) -> Self {
        match e {
            tantivy::TantivyError::LockFailure(
                tantivy::directory::error::LockError::LockBusy,
                _,
            ) => IndexError::Busy,
            other => IndexError::Store(other.to_string()),
        }
    }
}

/// The read side of an index.
pub(crate) trait TextIndex: Send + Sync {
    /// Runs `query` against the latest committed state.
    fn search(&self, query: &IndexQuery) -> Result<IndexHits, IndexError>;

    /// The messages of a folder that may hold a clue, newest first (scores are 0).
    fn candidates(&self, query: &CandidateQuery) -> Result<IndexHits, IndexError>;

    /// One message's summary by backend id, when indexed.
    fn summary(&self, id: &str) -> Result<Option<MessageSummary>, IndexError>;

    /// The summaries of several messages of a folder, in order, from one view of the index
    /// (`None` for one not indexed).
    fn summaries_in(
        &self,
        folder_id: &str,
        ids: &[&str],
    ) -> Result<Vec<Option<MessageSummary>>, IndexError>;

    /// The Internet Message-ID of a folder's message, when indexed and it has one.
    fn message_id(&self, folder_id: &str, id: &str) -> Result<Option<String>, IndexError>;
}

/// The write side: the sync process holds the only one (an exclusive lock).
pub(crate) trait TextIndexWriter: Send {
    /// Adds or replaces (by folder and backend id) one message.
    fn put(&mut self, message: &IndexedMessage) -> Result<(), IndexError>;

    /// Removes a message of a folder by backend id (no error when absent). Scoped to the
    /// folder: a backend whose ids survive a move lists the same id in the folder it left and
    /// the one it reached.
    fn remove(&mut self, folder_id: &str, id: &str) -> Result<(), IndexError>;

    /// Makes everything put and removed so far durable and visible to readers, atomically.
    fn commit(&mut self) -> Result<(), IndexError>;
}
