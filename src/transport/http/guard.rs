//! The checks every HTTP request passes on its head alone, before a byte of its body is read:
//! `Host` (DNS rebinding), `Origin` (cross-site requests from a browser) and, for `/mcp`, the
//! bearer token.
//!
//! Invariants: `Host` must name a loopback host (`localhost`, 127.0.0.0/8, `[::1]`) with exactly
//! the bound port — rmcp's own check accepts any port, and a page on another local port must not
//! pass; a request in absolute form must pass the same check on its URI; a repeated `Host`,
//! `Origin` or `Authorization` header is refused rather than one picked. The bearer is compared as
//! a SHA-256 digest in constant time (`subtle`), and neither the token nor a refused header
//! value is logged.

use http::header::{AUTHORIZATION, HOST, ORIGIN};
use http::{HeaderMap, HeaderValue, Uri};
use subtle::ConstantTimeEq as _;

use super::settings::{Auth, TokenDigest, serialize_origin};
use crate::caller::Caller;

/// Why a request was refused on its head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// 403: `Host` (or the URI's authority) is not a loopback host with the bound port.
    Host,
    /// 403: `Origin` is present and not allowed.
    Origin,
    /// 401: no valid bearer token.
    Unauthorized,
}

/// How clients name this machine's loopback interface in a URL (the server's own origins, and
/// the hosts rmcp's check is given).
const LOOPBACK_NAMES: [&str; 3] = ["127.0.0.1", "localhost", "[::1]"];

/// The head checks for one bound port.
pub(crate) struct Guard {
    port: u16,
    /// ASCII origin serializations (and possibly `null`).
    origins: Vec<String>,
    /// With the resource server: the public URL's authority as clients write it in `Host`
    /// (`mail.example.com`, or with its port when the URL names one), lower-cased.
    public: Option<String>,
    auth: Auth,
}

impl Guard {
    /// The guard for a server bound on `port`: the loopback origins of that port are always
    /// allowed (they are this server's own), `extra` besides.
    pub(crate) fn new(port: u16, extra: &[String], auth: Auth) -> Self {
        let mut origins: Vec<String> = LOOPBACK_NAMES
            .iter()
            .map(|host| format!("http://{host}:{port}"))
            .collect();
        origins.extend(extra.iter().cloned());
        Self {
            port,
            origins,
            public: None,
            auth,
        }
    }

    /// The guard of a server people reach by its public URL (directly over TLS, or through the
    /// operator's TLS-terminating proxy): that URL's host and origin are this server's own too.
    pub(crate) fn reached_by_public_url(mut self) -> Self {
        self.public = match &self.auth {
            Auth::ResourceServer(o) => {
                self.origins.push(o.resource.origin().ascii_serialization());
                o.resource.host_str().map(|host| match o.resource.port() {
                    Some(port) => format!("{host}:{port}").to_ascii_lowercase(),
                    None => host.to_ascii_lowercase(),
                })
            }
            _ => None,
        };
        self
    }

    /// `Host` and `Origin`, for every route.
    pub(crate) fn check_site(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        let host = single(headers, &HOST).ok_or(Refusal::Host)?;
        let host = host.to_str().map_err(|_| Refusal::Host)?;
        if !self.is_own_authority(host) {
            return Err(Refusal::Host);
        }
        if let Some(authority) = uri.authority()
            && !self.is_own_authority(authority.as_str())
        {
            return Err(Refusal::Host);
        }
        if !headers.contains_key(ORIGIN) {
            return Ok(());
        }
        let allowed = single(headers, &ORIGIN)
            .and_then(|v| v.to_str().ok())
            .and_then(serialize_origin)
            .is_some_and(|origin| self.origins.contains(&origin));
        if allowed {
            Ok(())
        } else {
            Err(Refusal::Origin)
        }
    }

    /// The bearer token, for `/mcp`.
    /// The request's verified caller, from its `Authorization` header. The loopback modes (the
    /// static bearer, or none with `OUTLOOK_HTTP_ALLOW_NO_AUTH`) serve the one operator.
    pub(crate) fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, Refusal> {
        let expected = match &self.auth {
            Auth::Bearer(expected) => expected,
            Auth::Open => return Ok(Caller::Operator),
            // People are authenticated by the resource server (`front`), never here: fail closed.
            Auth::ResourceServer(_) => return Err(Refusal::Unauthorized),
        };
        let presented = single(headers, &AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|token| !token.is_empty())
            .ok_or(Refusal::Unauthorized)?;
        let presented = TokenDigest::of(presented);
        if bool::from(presented.0.ct_eq(&expected.0)) {
            Ok(Caller::Operator)
        } else {
            Err(Refusal::Unauthorized)
        }
    }

    /// `host[:port]` names a loopback host and exactly the bound port (no port means 80). Parsed
    /// here, strictly: the `http` crate's `Authority` reads `localhost:1,x[::1]:4100` as host
    /// `localhost`, port 4100 (found by the `http_guard` fuzz target).
    fn is_own_authority(&self, value: &str) -> bool {
        if self
            .public
            .as_deref()
            .is_some_and(|public| value.eq_ignore_ascii_case(public))
        {
            return true;
        }
        let (host, port) = match value.rsplit_once(':') {
            // A colon inside brackets belongs to an IPv6 literal without a port.
            Some((host, port)) if !port.contains(']') => (host, port),
            _ => (value, "80"),
        };
        // The port as clients write it: canonical decimal, no sign or leading zero.
        port == self.port.to_string() && is_loopback_host(host)
    }

    /// The hosts rmcp's own check should allow: the loopback names with the bound port.
    pub(crate) fn hosts_with_port(&self) -> Vec<String> {
        LOOPBACK_NAMES
            .iter()
            .map(|name| format!("{name}:{}", self.port))
            .chain(self.public.clone())
            .collect()
    }

    /// The allowed origins as rmcp wants them: with an explicit port (an entry without one
    /// matches any port there, deprecated, with a warning at startup).
    pub(crate) fn origins_with_ports(&self) -> Vec<String> {
        self.origins
            .iter()
            .map(|origin| match url::Url::parse(origin) {
                Ok(url) if url.port().is_none() => match url.port_or_known_default() {
                    Some(port) => format!("{origin}:{port}"),
                    None => origin.clone(),
                },
                _ => origin.clone(),
            })
            .collect()
    }
}

/// `localhost`, an IPv4 address in 127.0.0.0/8, or `[::1]`.
fn is_loopback_host(host: &str) -> bool {
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6
            .parse::<std::net::Ipv6Addr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback()),
    }
}

/// The header's value when it appears exactly once.
fn single<'a>(headers: &'a HeaderMap, name: &http::HeaderName) -> Option<&'a HeaderValue> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    values.next().is_none().then_some(first)
}

/// Fuzz oracle (`mailgate::fuzzing::http_guard`): `data` split at NUL bytes gives a `Host`, an
/// `Origin`, an `Authorization` value and a request target, each used when it is a valid header
/// value (or URI). A head the guard accepts must be one an independent reading accepts: a Host of
/// `<loopback host>:4100`, an Origin (when present) whose serialization is allowed, and a bearer
/// whose token is exactly the configured one.
#[cfg(any(test, fuzzing))]
pub(crate) fn fuzz(data: &[u8]) {
    const PORT: u16 = 4100;
    const TOKEN: &str = "fuzz-token-0123456789";
    let mut parts = data.split(|b| *b == 0);
    let mut headers = HeaderMap::new();
    for name in [HOST, ORIGIN, AUTHORIZATION] {
        if let Some(value) = parts.next().and_then(|p| HeaderValue::from_bytes(p).ok()) {
            headers.insert(name, value);
        }
    }
    let uri = parts
        .next()
        .and_then(|p| Uri::try_from(p).ok())
        .unwrap_or_else(|| Uri::from_static("/mcp"));
    let guard = Guard::new(
        PORT,
        &["https://app.example.com".to_owned()],
        Auth::Bearer(TokenDigest::of(TOKEN)),
    );
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if guard.check_site(&uri, &headers).is_ok() {
        let host = text(HOST).expect("oracle: an accepted head has a textual Host");
        let (name, port) = host
            .rsplit_once(':')
            .expect("oracle: an accepted Host names the port");
        assert_eq!(port, "4100", "oracle: an accepted Host has the bound port");
        let loopback = name.eq_ignore_ascii_case("localhost")
            || name
                .strip_prefix('[')
                .and_then(|n| n.strip_suffix(']'))
                .and_then(|n| n.parse::<std::net::Ipv6Addr>().ok())
                .is_some_and(|ip| ip == std::net::Ipv6Addr::LOCALHOST)
            || name
                .parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| ip.octets()[0] == 127);
        assert!(loopback, "oracle: an accepted Host is loopback: {host:?}");
        if let Some(origin) = headers.get(ORIGIN) {
            let origin = origin.to_str().expect("oracle: an accepted Origin is text");
            let allowed = [
                "http://127.0.0.1:4100",
                "http://localhost:4100",
                "http://[::1]:4100",
                "https://app.example.com",
            ];
            let serialized = url::Url::parse(origin)
                .map(|u| u.origin().ascii_serialization())
                .unwrap_or_default();
            assert!(
                allowed.contains(&serialized.as_str()),
                "oracle: an accepted Origin is allowed: {origin:?}"
            );
        }
    }
    if guard.authenticate(&headers).is_ok() {
        let value = text(AUTHORIZATION).expect("oracle: an accepted bearer is text");
        let (scheme, token) = value.split_once(' ').expect("oracle: scheme and token");
        assert!(
            scheme.eq_ignore_ascii_case("bearer"),
            "oracle: the scheme is Bearer"
        );
        assert_eq!(token.trim(), TOKEN, "oracle: only the token passes");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PORT: u16 = 3010;

    fn guard(auth: Auth) -> Guard {
        Guard::new(PORT, &["https://app.example.com".to_owned()], auth)
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn site(pairs: &[(&str, &str)]) -> Result<(), Refusal> {
        guard(Auth::Open).check_site(&Uri::from_static("/mcp"), &headers(pairs))
    }

    /// With the resource server reached by its public URL, that URL's host (as clients write it)
    /// and origin are the server's own; without `reached_by_public_url`, they are not.
    #[test]
    fn the_public_url_is_own_only_when_people_reach_it() {
        let oauth = crate::transport::http::oauth::OAuthSettings {
            issuer: "https://login.example.com/t".into(),
            resource: url::Url::parse("https://mail.example.com/mcp").expect("url"),
            scopes: vec!["mail.read".into()],
            accept_plain_jwt: false,
            requests_per_minute: 120,
        };
        let direct = Guard::new(PORT, &[], Auth::ResourceServer(oauth.clone()));
        let public = Guard::new(PORT, &[], Auth::ResourceServer(oauth)).reached_by_public_url();
        let site = |g: &Guard, host: &str, origin: Option<&str>| {
            let mut pairs = vec![("host", host)];
            pairs.extend(origin.map(|o| ("origin", o)));
            g.check_site(&Uri::from_static("/mcp"), &headers(&pairs))
        };
        assert_eq!(site(&direct, "mail.example.com", None), Err(Refusal::Host));
        assert_eq!(site(&public, "mail.example.com", None), Ok(()));
        assert_eq!(site(&public, "MAIL.Example.com", None), Ok(()));
        assert_eq!(
            site(&public, "mail.example.com:8443", None),
            Err(Refusal::Host)
        );
        assert_eq!(site(&public, "evil.example.com", None), Err(Refusal::Host));
        assert_eq!(
            site(
                &public,
                "mail.example.com",
                Some("https://mail.example.com")
            ),
            Ok(())
        );
        assert_eq!(
            site(
                &public,
                "mail.example.com",
                Some("https://evil.example.com")
            ),
            Err(Refusal::Origin)
        );
        assert!(
            public
                .hosts_with_port()
                .contains(&"mail.example.com".to_owned())
        );
    }

    #[test]
    fn host_must_be_loopback_with_the_bound_port() {
        for ok in [
            "127.0.0.1:3010",
            "localhost:3010",
            "LocalHost:3010",
            "[::1]:3010",
            "127.44.0.1:3010",
        ] {
            assert_eq!(site(&[("host", ok)]), Ok(()), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:3010",
            "127.0.0.1",
            "127.0.0.1:3011",
            "localhost:1",
            "localhost",
            "localhost.:3010",
            "localhost.evil.example:3010",
            "[::ffff:127.0.0.1]:3010",
            "0.0.0.0:3010",
            "user@127.0.0.1:3010",
            "127.1:3010",
            "",
            "localhost:410,oc[::1]:3010",
            "localhost:1,x:3010",
            "[::1]x:3010",
            "localhost:+3010",
            "localhost:03010",
            "localhost :3010",
            "[::1]",
        ] {
            assert_eq!(site(&[("host", bad)]), Err(Refusal::Host), "{bad}");
        }
        assert_eq!(site(&[]), Err(Refusal::Host), "missing");
        assert_eq!(
            site(&[("host", "127.0.0.1:3010"), ("host", "evil.example")]),
            Err(Refusal::Host),
            "repeated"
        );
        // Absolute form: the URI's authority is checked too.
        let g = guard(Auth::Open);
        let h = headers(&[("host", "127.0.0.1:3010")]);
        assert_eq!(
            g.check_site(&Uri::from_static("http://evil.example:3010/mcp"), &h),
            Err(Refusal::Host)
        );
        assert_eq!(
            g.check_site(&Uri::from_static("http://localhost:3010/mcp"), &h),
            Ok(())
        );
    }

    #[test]
    fn origin_when_present_must_be_allowed() {
        let host = ("host", "127.0.0.1:3010");
        for ok in [
            "http://127.0.0.1:3010",
            "http://localhost:3010",
            "http://[::1]:3010",
            "https://app.example.com",
            "https://APP.example.com:443",
        ] {
            assert_eq!(site(&[host, ("origin", ok)]), Ok(()), "{ok}");
        }
        for bad in [
            "http://evil.example",
            "http://localhost:3011",
            "http://127.0.0.1",
            "https://127.0.0.1:3010",
            "http://app.example.com",
            "https://app.example.com:8443",
            "null",
            "file://",
            "garbage",
        ] {
            assert_eq!(
                site(&[host, ("origin", bad)]),
                Err(Refusal::Origin),
                "{bad}"
            );
        }
        assert_eq!(
            site(&[
                host,
                ("origin", "http://localhost:3010"),
                ("origin", "http://evil.example")
            ]),
            Err(Refusal::Origin),
            "repeated"
        );
        let with_null = Guard::new(PORT, &["null".to_owned()], Auth::Open);
        assert_eq!(
            with_null.check_site(
                &Uri::from_static("/"),
                &headers(&[host, ("origin", "null")])
            ),
            Ok(())
        );
    }

    #[test]
    fn the_bearer_must_match_and_the_scheme_is_case_insensitive() {
        let g = guard(Auth::Bearer(TokenDigest::of("s3cret-token-0123456789")));
        let check = |pairs: &[(&str, &str)]| {
            g.authenticate(&headers(pairs))
                .map(|c| matches!(c, Caller::Operator))
        };
        assert_eq!(
            check(&[("authorization", "Bearer s3cret-token-0123456789")]),
            Ok(true)
        );
        assert_eq!(
            check(&[("authorization", "bearer s3cret-token-0123456789 ")]),
            Ok(true)
        );
        for bad in [
            "Bearer s3cret-token-012345678",
            "Bearer s3cret-token-01234567890",
            "Bearer ",
            "Basic czNjcmV0LXRva2Vu",
            "s3cret-token-0123456789",
            "Bearers3cret-token-0123456789",
        ] {
            assert_eq!(
                check(&[("authorization", bad)]),
                Err(Refusal::Unauthorized),
                "{bad}"
            );
        }
        assert_eq!(check(&[]), Err(Refusal::Unauthorized));
        assert_eq!(
            check(&[
                ("authorization", "Bearer s3cret-token-0123456789"),
                ("authorization", "Bearer other")
            ]),
            Err(Refusal::Unauthorized),
            "repeated"
        );
        assert!(matches!(
            guard(Auth::Open).authenticate(&headers(&[])),
            Ok(Caller::Operator)
        ));
    }

    #[test]
    fn the_fuzz_oracle_holds_on_its_seeds() {
        for seed in [
            &b"127.0.0.1:4100\0http://localhost:4100\0Bearer fuzz-token-0123456789"[..],
            b"localhost:4100\0\0bearer  fuzz-token-0123456789 \0http://localhost:4100/mcp",
            b"evil.example:4100\0null\0Bearer x",
        ] {
            fuzz(seed);
        }
    }

    proptest! {
        /// Any host that is not loopback, and any port but the bound one, is refused.
        #[test]
        fn only_loopback_hosts_on_the_bound_port_pass(
            a in any::<u8>(), b in any::<u8>(), c in any::<u8>(), d in any::<u8>(),
            port in any::<u16>(),
        ) {
            let ip = std::net::Ipv4Addr::new(a, b, c, d);
            let value = format!("{ip}:{port}");
            let want = ip.is_loopback() && port == PORT;
            prop_assert_eq!(site(&[("host", &value)]).is_ok(), want);
        }

        #[test]
        fn only_the_token_passes(token in "[!-~]{1,40}") {
            let g = guard(Auth::Bearer(TokenDigest::of("the-one-token-0123456789")));
            let value = format!("Bearer {token}");
            let ok = g.authenticate(&headers(&[("authorization", &value)])).is_ok();
            prop_assert_eq!(ok, token == "the-one-token-0123456789");
        }
    }
}
