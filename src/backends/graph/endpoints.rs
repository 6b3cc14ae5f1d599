//! Every URL the Graph backend sends a request to, and every query it writes, is built here.
//!
//! Invariants:
//! - The base and login URLs are `https`, or `http` only to a loopback host (tests, a local
//!   proxy); neither may carry userinfo, a query or a fragment. Startup refuses anything else.
//! - A caller-supplied value (message, folder or attachment id) only ever becomes one
//!   percent-encoded path segment; `.`, `..`, empty and over-long ids are refused before a URL
//!   exists, so URL normalisation cannot turn an id into another route.
//! - A `@odata.nextLink` is followed only when it points at the configured Graph origin and
//!   version path: the bearer token is never sent anywhere a response told us to send it.
//! - `$search` text is built from the query's words only (letters and digits): no quote,
//!   backslash, colon or KQL operator from the caller reaches Graph, so the query cannot become
//!   a property restriction or escape its quotes. `$filter` holds only the metadata clauses
//!   Graph documents as combinable with `$orderby`, the ordered property first.

use chrono::{DateTime, SecondsFormat, Utc};
use reqwest::Url;

use super::super::model::{Filters, FolderSelector, Order, SortBy, SortOrder, WellKnown};
use crate::backends::BackendError;
pub(crate) use crate::service_url::{UrlError, parse_root};

/// Longest id accepted as a path segment (Graph ids are about 150 characters).
pub(crate) const MAX_ID_LEN: usize = 512;

/// The checked base URLs and the token request's fixed parts.
#[derive(Clone, Debug)]
pub(crate) struct Endpoints {
    /// Graph's versioned root, without a trailing slash (`https://graph.microsoft.com/v1.0`).
    base: Url,
    /// `{login}/{tenant}/oauth2/v2.0/token`.
    token_url: Url,
    /// `{graph origin}/.default`: every application permission granted to the app.
    scope: String,
}

/// `url` with its path's trailing slashes removed.
fn without_trailing_slash(mut url: Url) -> Url {
    let trimmed = url.path().trim_end_matches('/').to_owned();
    url.set_path(&trimmed);
    url
}

impl Endpoints {
    /// Checks the configured roots (`Err` names which one and why).
    pub(crate) fn new(
        base: &str,
        login: &str,
        tenant_id: &str,
    ) -> Result<Self, (&'static str, UrlError)> {
        let base = without_trailing_slash(
            parse_root(base).map_err(|e| (crate::config::graph::BASE_URL_VAR, e))?,
        );
        let login = without_trailing_slash(
            parse_root(login).map_err(|e| (crate::config::graph::LOGIN_URL_VAR, e))?,
        );
        let mut token_url = login;
        token_url
            .path_segments_mut()
            .map_err(|()| (crate::config::graph::LOGIN_URL_VAR, UrlError::Unparsable))?
            .extend([tenant_id, "oauth2", "v2.0", "token"]);
        let scope = format!("{}/.default", base.origin().ascii_serialization());
        Ok(Self {
            base,
            token_url,
            scope,
        })
    }

    pub(crate) fn token_url(&self) -> &Url {
        &self.token_url
    }

    pub(crate) fn scope(&self) -> &str {
        &self.scope
    }

    /// `{base}/users/{address}/{segments…}`, each segment percent-encoded as one segment.
    /// `segments` are ids checked by [`segment`] and literals of this module.
    pub(crate) fn user(&self, address: &str, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.push("users").push(address).extend(segments);
        }
        url
    }

    /// The `$batch` endpoint.
    pub(crate) fn batch(&self) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.push("$batch");
        }
        url
    }

    /// `url` (built by [`Self::user`]) relative to the versioned root, as a `$batch` step
    /// names it: `/users/…?…`.
    pub(crate) fn relative(&self, url: &Url) -> String {
        let path = url
            .path()
            .strip_prefix(self.base.path())
            .unwrap_or(url.path());
        match url.query() {
            Some(q) => format!("{path}?{q}"),
            None => path.to_owned(),
        }
    }

    /// The nextLink as a URL to follow, or `Malformed` when it leaves the configured Graph root
    /// (another scheme, host, port or version path). Userinfo and fragment are dropped.
    pub(crate) fn next_link(&self, link: &str) -> Result<Url, BackendError> {
        let mut url = Url::parse(link).map_err(|_| BackendError::Malformed)?;
        let prefix = format!("{}/", self.base.path());
        if url.scheme() != self.base.scheme()
            || url.host_str() != self.base.host_str()
            || url.port_or_known_default() != self.base.port_or_known_default()
            || !url.path().starts_with(&prefix)
        {
            return Err(BackendError::Malformed);
        }
        let _ = url.set_username("");
        let _ = url.set_password(None);
        url.set_fragment(None);
        Ok(url)
    }
}

/// An id that may become one path segment.
pub(crate) fn segment(id: &str) -> Result<&str, BackendError> {
    if id.is_empty()
        || id == "."
        || id == ".."
        || id.len() > MAX_ID_LEN
        || id.chars().any(char::is_control)
    {
        return Err(BackendError::BadId);
    }
    Ok(id)
}

/// Graph's well-known folder name (mailgate's canonical names are Graph's).
pub(crate) fn well_known(name: WellKnown) -> &'static str {
    name.label()
}

/// The path segment naming a folder: its well-known name or its checked id.
pub(crate) fn folder(selector: &FolderSelector) -> Result<&str, BackendError> {
    match selector {
        FolderSelector::WellKnown(name) => Ok(well_known(*name)),
        FolderSelector::Id(id) => segment(id),
    }
}

/// The `$search` value for `query`: its words (maximal runs of letters and digits),
/// lower-cased, space-separated, in double quotes; `None` when it has no word. KQL operators
/// are upper-case, so lower-casing also keeps `AND`/`OR`/`NOT` as plain words.
pub(crate) fn search_expression(query: &str) -> Option<String> {
    let words = crate::backends::model::query_words(query);
    (!words.is_empty()).then(|| format!("\"{}\"", words.join(" ")))
}

fn iso(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The `$filter` and `$orderby` of a listing. Only metadata clauses go to Graph (received
/// date, read state, attachments); sender and subject are matched locally, because Graph's
/// `contains` on them is not supported for messages. Graph requires every `$orderby` property
/// to appear in `$filter`, first, so a filtered listing ordered by date opens with a date
/// clause (an always-true lower bound when the caller gave none).
pub(crate) fn listing_query(filters: &Filters, order: Order) -> (Option<String>, Option<String>) {
    let mut clauses = Vec::new();
    if let Some(from) = filters.date_from {
        clauses.push(format!("receivedDateTime ge {}", iso(from)));
    }
    if let Some(to) = filters.date_to {
        clauses.push(format!("receivedDateTime le {}", iso(to)));
    }
    let dated = !clauses.is_empty();
    if let Some(read) = filters.is_read {
        clauses.push(format!("isRead eq {read}"));
    }
    if let Some(has) = filters.has_attachments {
        clauses.push(format!("hasAttachments eq {has}"));
    }
    let orderby = match order.by {
        SortBy::ReceivedDateTime => Some(match order.direction {
            SortOrder::Asc => "receivedDateTime asc".to_owned(),
            SortOrder::Desc => "receivedDateTime desc".to_owned(),
        }),
        // Graph would need the subject in $filter too; the engine orders the window itself.
        SortBy::Subject => None,
    };
    if orderby.is_some() && !clauses.is_empty() && !dated {
        clauses.insert(0, "receivedDateTime ge 1900-01-01T00:00:00Z".to_owned());
    }
    let filter = (!clauses.is_empty()).then(|| clauses.join(" and "));
    (filter, orderby)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints() -> Endpoints {
        Endpoints::new(
            "https://graph.microsoft.com/v1.0/",
            "https://login.microsoftonline.com",
            "22222222-2222-4222-8222-222222222222",
        )
        .expect("valid")
    }

    #[test]
    fn roots_are_https_or_loopback_http_without_extras() {
        for ok in [
            "https://graph.microsoft.us/v1.0",
            "http://127.0.0.1:8080/v1.0",
            "http://[::1]:9/v1.0",
            "http://localhost:1/v1.0",
        ] {
            assert!(parse_root(ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("http://graph.microsoft.com/v1.0", UrlError::Insecure),
            ("http://127.0.0.1.example.com/v1.0", UrlError::Insecure),
            ("ftp://127.0.0.1/v1.0", UrlError::Insecure),
            ("https://user:pw@graph.microsoft.com/v1.0", UrlError::Extras),
            ("https://graph.microsoft.com/v1.0?x=1", UrlError::Extras),
            ("https://graph.microsoft.com/v1.0#f", UrlError::Extras),
            ("graph.microsoft.com/v1.0", UrlError::Unparsable),
        ] {
            assert_eq!(parse_root(bad).err(), Some(why), "{bad}");
        }
    }

    #[test]
    fn token_url_and_scope_follow_the_configured_cloud() {
        let e = endpoints();
        assert_eq!(
            e.token_url().as_str(),
            "https://login.microsoftonline.com/22222222-2222-4222-8222-222222222222/oauth2/v2.0/token"
        );
        assert_eq!(e.scope(), "https://graph.microsoft.com/.default");
    }

    #[test]
    fn ids_become_one_encoded_segment_and_dot_segments_are_refused() {
        let e = endpoints();
        let url = e.user(
            "finance@example.com",
            &["messages", segment("a/b?c#d%e").expect("ok"), "move"],
        );
        assert_eq!(
            url.as_str(),
            "https://graph.microsoft.com/v1.0/users/finance@example.com/messages/a%2Fb%3Fc%23d%25e/move"
        );
        for bad in ["", ".", "..", "a\nb", &"x".repeat(MAX_ID_LEN + 1)] {
            assert!(matches!(segment(bad), Err(BackendError::BadId)), "{bad:?}");
        }
    }

    #[test]
    fn batch_steps_name_urls_relative_to_the_root() {
        let e = endpoints();
        assert_eq!(
            e.batch().as_str(),
            "https://graph.microsoft.com/v1.0/$batch"
        );
        let mut url = e.user("a@example.com", &["messages", "A/B"]);
        url.query_pairs_mut().append_pair("$select", "body");
        assert_eq!(
            e.relative(&url),
            "/users/a@example.com/messages/A%2FB?%24select=body"
        );
    }

    #[test]
    fn next_links_must_stay_on_the_graph_root() {
        let e = endpoints();
        let good = e
            .next_link("https://u:p@graph.microsoft.com/v1.0/users/a/messages?$skip=10#frag")
            .expect("same root");
        assert_eq!(
            good.as_str(),
            "https://graph.microsoft.com/v1.0/users/a/messages?$skip=10"
        );
        for bad in [
            "https://graph.microsoft.com.example.net/v1.0/users/a/messages",
            "http://graph.microsoft.com/v1.0/users/a/messages",
            "https://graph.microsoft.com:8443/v1.0/users/a/messages",
            "https://graph.microsoft.com/beta/users/a/messages",
            "https://graph.microsoft.com/v1.0",
            "/v1.0/users/a/messages",
        ] {
            assert!(e.next_link(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn search_expressions_keep_words_only() {
        assert_eq!(
            search_expression(r#"Invoice "2024" from:boss\" OR x"#).as_deref(),
            Some(r#""invoice 2024 from boss or x""#)
        );
        assert_eq!(
            search_expression("Fatura ação").as_deref(),
            Some(r#""fatura ação""#)
        );
        assert_eq!(search_expression(r#" "'\:() "#), None);
    }

    #[test]
    fn filters_put_the_ordered_property_first() {
        let order = Order::default();
        let filters = Filters {
            is_read: Some(false),
            has_attachments: Some(true),
            sender: Some("ignored locally".into()),
            ..Filters::default()
        };
        let (filter, orderby) = listing_query(&filters, order);
        assert_eq!(
            filter.as_deref(),
            Some(
                "receivedDateTime ge 1900-01-01T00:00:00Z and isRead eq false and \
                 hasAttachments eq true"
            )
        );
        assert_eq!(orderby.as_deref(), Some("receivedDateTime desc"));
        let dated = Filters {
            date_from: DateTime::parse_from_rfc3339("2024-01-02T03:04:05Z")
                .ok()
                .map(|d| d.with_timezone(&Utc)),
            ..Filters::default()
        };
        assert_eq!(
            listing_query(&dated, order).0.as_deref(),
            Some("receivedDateTime ge 2024-01-02T03:04:05Z")
        );
        assert_eq!(listing_query(&Filters::default(), order).0, None);
    }
}
