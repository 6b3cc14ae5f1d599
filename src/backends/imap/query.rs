//! IMAP SEARCH criteria, built from structured keys (stub: the builder lands with issue 12).

/// One search key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    /// `TEXT "…"`: header or body contains.
    Text(String),
    /// `SUBJECT "…"`.
    Subject(String),
    /// `FROM "…"`.
    From(String),
    /// `HEADER Message-ID "…"`.
    MessageId(String),
    /// `SINCE d-Mon-yyyy` (internal date on or after the day).
    Since(chrono::NaiveDate),
    /// `BEFORE d-Mon-yyyy` (internal date before the day).
    Before(chrono::NaiveDate),
    Seen,
    Unseen,
    /// `UID set`, from UIDs.
    Uids(Vec<u32>),
    Not(Box<Key>),
    Or(Box<Key>, Box<Key>),
}

/// Keys that must all match; none is `ALL`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Criteria {
    pub(crate) keys: Vec<Key>,
}

/// Why criteria cannot be put on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum QueryError {
    #[error("a search string holds a control character (CR, LF or NUL)")]
    ControlChar,
}

impl Criteria {
    /// The arguments of `UID SEARCH`.
    pub(crate) fn to_arguments(&self) -> Result<String, QueryError> {
        let _ = &self.keys;
        Ok("ALL".to_owned())
    }
}

/// `value` as an IMAP quoted string.
pub(crate) fn quote(value: &str) -> Result<String, QueryError> {
    Ok(format!("\"{value}\""))
}

/// A UID sequence set for `uids` (e.g. `1:3,7`).
pub(crate) fn uid_set(uids: &[u32]) -> String {
    uids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
