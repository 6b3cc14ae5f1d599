//! The root URL of a remote service the operator configures (Graph's base and login roots, an
//! OAuth provider's login root): one rule for every place a bearer token or a credential is
//! sent, kept outside `backends` and `delegated` so both can use it without importing each
//! other.
//!
//! Invariant: a root is `https`, or `http` only to a loopback host (tests, a local proxy), and
//! carries no user name, password, query or fragment.

use reqwest::Url;

/// Why a configured URL was refused (the message names the rule, not the value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UrlError {
    #[error("is not an absolute URL")]
    Unparsable,
    #[error("must use https (plain http only to a loopback host such as 127.0.0.1)")]
    Insecure,
    #[error("must not carry a user name, password, query or fragment")]
    Extras,
}

/// A configured root: https, or http to loopback; nothing after the path.
pub(crate) fn parse_root(raw: &str) -> Result<Url, UrlError> {
    let url = Url::parse(raw.trim()).map_err(|_| UrlError::Unparsable)?;
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => return Err(UrlError::Unparsable),
    };
    match url.scheme() {
        "https" => {}
        "http" if loopback => {}
        _ => return Err(UrlError::Insecure),
    }
    if !url.username().is_empty()
        || url.password().is_some()
        || url.query().is_some()
        || url.fragment().is_some()
    {
        return Err(UrlError::Extras);
    }
    Ok(url)
}
