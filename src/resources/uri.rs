//! The `mailgate://` resource addresses: parsing a client's URI into the one view it names, and
//! the templates a client fills in. Parsing is strict (one scheme, the known paths, an alias of
//! the allowlist's syntax, the contacts query as the only parameter); anything else is refused
//! before any mailbox is looked at, and the refusal quotes nothing of the URI.

use crate::alias::Alias;

pub(crate) const MAILBOXES: &str = "mailgate://mailboxes";
pub(crate) const POLICY: &str = "mailgate://policy";

/// The per-alias views, each a template `mailgate://{alias}/<path>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum View {
    Folders,
    Categories,
    Contacts,
    Index,
}

impl View {
    pub(crate) const ALL: [View; 4] =
        [View::Folders, View::Categories, View::Contacts, View::Index];

    pub(crate) fn path(self) -> &'static str {
        match self {
            View::Folders => "folders",
            View::Categories => "categories",
            View::Contacts => "contacts",
            View::Index => "index",
        }
    }

    /// The Microsoft Graph application permission reading the view needs.
    pub(crate) fn graph_permission(self) -> &'static str {
        match self {
            View::Folders => "Mail.Read",
            View::Categories => "MailboxSettings.Read",
            View::Contacts => "Contacts.Read (no query), People.Read.All (with a query)",
            View::Index => "none (the local index)",
        }
    }

    /// What reading the view asks of an IMAP server.
    pub(crate) fn imap_capability(self) -> &'static str {
        match self {
            View::Folders => "IMAP4rev1 LIST, STATUS",
            View::Categories => "IMAP4rev1 EXAMINE INBOX (FLAGS, PERMANENTFLAGS keywords)",
            View::Contacts => "IMAP4rev1 read (UID FETCH of recent headers)",
            View::Index => "none (the local index)",
        }
    }

    /// The RFC 6570 template a client fills in.
    pub(crate) fn template(self) -> String {
        match self {
            View::Contacts => "mailgate://{alias}/contacts{?query}".to_owned(),
            other => format!("mailgate://{{alias}}/{}", other.path()),
        }
    }
}

/// The longest contacts query (characters).
pub(crate) const MAX_QUERY_CHARS: usize = 200;

/// What a URI names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ResourceUri {
    Mailboxes,
    Policy,
    Alias {
        alias: Alias,
        view: View,
        /// Contacts only: the name or address fragment to match.
        query: Option<String>,
    },
}

/// Why a URI names nothing this server serves.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UriError {
    #[error(
        "not a mailgate resource (expected mailgate://mailboxes, mailgate://policy or mailgate://{{alias}}/folders|categories|contacts|index)"
    )]
    Unknown,
    #[error("the alias in the URI is not a valid alias")]
    BadAlias,
    #[error(
        "only mailgate://{{alias}}/contacts takes a parameter, and only `query` (1 to 200 characters)"
    )]
    BadQuery,
}

impl ResourceUri {
    pub(crate) fn parse(uri: &str) -> Result<Self, UriError> {
        let rest = uri.strip_prefix("mailgate://").ok_or(UriError::Unknown)?;
        let (path, params) = match rest.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (rest, None),
        };
        let fixed = match path {
            "mailboxes" => Some(ResourceUri::Mailboxes),
            "policy" => Some(ResourceUri::Policy),
            _ => None,
        };
        if let Some(fixed) = fixed {
            return match params {
                None => Ok(fixed),
                Some(_) => Err(UriError::BadQuery),
            };
        }
        let (alias, view) = path.split_once('/').ok_or(UriError::Unknown)?;
        let view = View::ALL
            .into_iter()
            .find(|v| v.path() == view)
            .ok_or(UriError::Unknown)?;
        let alias = percent_decode(alias)
            .and_then(|a| Alias::parse(&a.to_lowercase()).ok())
            .ok_or(UriError::BadAlias)?;
        let query = match (view, params) {
            (_, None) => None,
            (View::Contacts, Some(params)) => contacts_query(params)?,
            (_, Some(_)) => return Err(UriError::BadQuery),
        };
        Ok(ResourceUri::Alias { alias, view, query })
    }
}

impl ResourceUri {
    /// The URI naming this view, its query percent-encoded (what a client would send).
    #[cfg(any(test, fuzzing))]
    pub(crate) fn to_uri(&self) -> String {
        match self {
            ResourceUri::Mailboxes => MAILBOXES.to_owned(),
            ResourceUri::Policy => POLICY.to_owned(),
            ResourceUri::Alias { alias, view, query } => {
                let mut uri = format!("mailgate://{alias}/{}", view.path());
                if let Some(q) = query {
                    uri.push_str("?query=");
                    for b in q.bytes() {
                        if b.is_ascii_alphanumeric() {
                            uri.push(char::from(b));
                        } else {
                            uri.push_str(&format!("%{b:02X}"));
                        }
                    }
                }
                uri
            }
        }
    }
}

/// `query=…` (percent-encoded, `+` as a space), the only parameter; empty means none.
fn contacts_query(params: &str) -> Result<Option<String>, UriError> {
    if params.is_empty() {
        return Ok(None);
    }
    let value = params.strip_prefix("query=").ok_or(UriError::BadQuery)?;
    if value.contains('&') {
        return Err(UriError::BadQuery);
    }
    let decoded = percent_decode(&value.replace('+', " ")).ok_or(UriError::BadQuery)?;
    if decoded.chars().any(char::is_control) {
        return Err(UriError::BadQuery);
    }
    let trimmed = decoded.trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    if trimmed.chars().count() > MAX_QUERY_CHARS {
        return Err(UriError::BadQuery);
    }
    Ok(Some(trimmed.to_owned()))
}

/// RFC 3986 percent-decoding into UTF-8; `None` for a broken escape or invalid UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alias(uri: &str) -> (String, View, Option<String>) {
        match ResourceUri::parse(uri).expect(uri) {
            ResourceUri::Alias { alias, view, query } => (alias.to_string(), view, query),
            other => panic!("{uri}: {other:?}"),
        }
    }

    #[test]
    fn every_view_parses_and_the_contacts_query_decodes() {
        assert_eq!(ResourceUri::parse(MAILBOXES), Ok(ResourceUri::Mailboxes));
        assert_eq!(ResourceUri::parse(POLICY), Ok(ResourceUri::Policy));
        for view in View::ALL {
            let uri = view
                .template()
                .replace("{alias}", "Finance")
                .replace("{?query}", "");
            assert_eq!(alias(&uri), ("finance".to_owned(), view, None), "{uri}");
        }
        assert_eq!(
            alias("mailgate://finance/contacts?query=Ana%20Lima")
                .2
                .as_deref(),
            Some("Ana Lima")
        );
        assert_eq!(
            alias("mailgate://finance/contacts?query=ana+lima")
                .2
                .as_deref(),
            Some("ana lima")
        );
        assert_eq!(alias("mailgate://finance/contacts?query=").2, None);
    }

    #[test]
    fn anything_else_is_refused_without_a_lookup() {
        for (uri, want) in [
            ("https://finance/folders", UriError::Unknown),
            ("mailgate://finance", UriError::Unknown),
            ("mailgate://finance/messages", UriError::Unknown),
            ("mailgate://finance/folders/x", UriError::Unknown),
            ("mailgate://../folders", UriError::BadAlias),
            ("mailgate://fin%2Fance/folders", UriError::BadAlias),
            ("mailgate://fin%zzance/folders", UriError::BadAlias),
            ("mailgate://ana@example.com/folders", UriError::BadAlias),
            ("mailgate://finance/folders?query=x", UriError::BadQuery),
            ("mailgate://policy?x=1", UriError::BadQuery),
            ("mailgate://finance/contacts?q=x", UriError::BadQuery),
            (
                "mailgate://finance/contacts?query=a&query=b",
                UriError::BadQuery,
            ),
            ("mailgate://finance/contacts?query=%0A", UriError::BadQuery),
        ] {
            assert_eq!(ResourceUri::parse(uri), Err(want), "{uri}");
        }
        let long = format!("mailgate://finance/contacts?query={}", "a".repeat(201));
        assert_eq!(ResourceUri::parse(&long), Err(UriError::BadQuery));
    }

    proptest::proptest! {
        /// Whatever a client sends, parsing answers (never panics), and a URI it accepts names
        /// a valid alias.
        #[test]
        fn parsing_never_panics(uri in "mailgate://[a-z%0-9./?=&+@-]{0,40}") {
            if let Ok(parsed) = ResourceUri::parse(&uri) {
                if let ResourceUri::Alias { alias, .. } = &parsed {
                    proptest::prop_assert!(Alias::parse(alias.as_str()).is_ok());
                }
                proptest::prop_assert_eq!(ResourceUri::parse(&parsed.to_uri()), Ok(parsed));
            }
        }
    }
}
