//! The embeddings endpoint's settings, resolved once from the environment snapshot
//! ([`crate::config::env::Env`]). Both `MAILGATE_EMBEDDINGS_URL` and `MAILGATE_EMBEDDINGS_MODEL`
//! or neither: one without the other is a refusal, not a silent off, because the operator meant
//! something. The URL follows the Graph base URL's rule (`https`, or `http` to a loopback host;
//! no userinfo, query or fragment), checked by the same function. The optional key is read from
//! the variable named by `MAILGATE_EMBEDDINGS_API_KEY_ENV`, kept as a [`Secret`] (its `Debug`
//! redacts) and never shown in an error; neither is that variable's name, in case the operator
//! pasted the key there by mistake.
//!
//! URL choice: a URL whose path ends in `/embeddings` is the endpoint itself; any other is an
//! OpenAI-style base URL (what the OpenAI SDKs call `base_url`, e.g. `http://127.0.0.1:8080/v1`)
//! to which `/embeddings` is appended. Both spellings of one server give the same endpoint.
//!
//! Proxy choice (issue 27): the requests carry mail passages and the key, so the client never
//! takes a proxy from the ambient `http_proxy`/`HTTPS_PROXY`/`ALL_PROXY`, which are set for
//! other programs. A remote endpoint goes through a proxy only when the operator names one for
//! mailgate in `MAILGATE_EMBEDDINGS_PROXY` (`http://` or `https://`, host and port, optionally
//! `user:password@`; kept as a [`Secret`]); a loopback endpoint never does, and naming a proxy
//! for one is refused, as is naming one without an endpoint.

use reqwest::Url;

use crate::backends::graph::endpoints::{UrlError, parse_root};
use crate::config::embeddings::{API_KEY_ENV_VAR, MODEL_VAR, PROXY_VAR, URL_VAR};
use crate::config::env::{Env, Secret};

/// Longest model name accepted (names such as `nomic-embed-text:v1.5` are far shorter).
const MAX_MODEL_LEN: usize = 256;

/// The resolved endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EmbeddingSettings {
    /// The full embeddings endpoint (`…/embeddings`), checked.
    pub(crate) url: Url,
    pub(crate) model: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub(crate) api_key: Option<Secret>,
    /// The operator's proxy for a remote endpoint (`MAILGATE_EMBEDDINGS_PROXY`, checked); never
    /// set for a loopback one. Without it the client uses no proxy at all.
    pub(crate) proxy: Option<Secret>,
}

/// Why the embeddings settings were refused. Messages name variables and rules, never a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EmbeddingSettingsError {
    #[error(
        "{set} is set but {missing} is not; semantic recall needs both (or neither, to stay \
         lexical)"
    )]
    Incomplete {
        set: &'static str,
        missing: &'static str,
    },
    #[error("{URL_VAR} {0}")]
    Url(UrlError),
    #[error(
        "{MODEL_VAR} must be a model name of at most 256 characters without control characters"
    )]
    Model,
    #[error(
        "{API_KEY_ENV_VAR} must be the name of the variable holding the key (letters, digits \
         and underscores), not the key itself; value not shown"
    )]
    KeyVarName,
    #[error(
        "the variable named by {API_KEY_ENV_VAR} is not set or is empty; name and value not shown"
    )]
    KeyMissing,
    #[error(
        "{PROXY_VAR} must be an http:// or https:// proxy URL with a host (and optionally a port \
         and user:password), without path, query or fragment; value not shown"
    )]
    Proxy,
    #[error(
        "{PROXY_VAR} is set but {URL_VAR} names a loopback host, which is never reached through \
         a proxy; unset {PROXY_VAR}"
    )]
    ProxyForLoopback,
}

impl EmbeddingSettings {
    /// `None` when neither URL nor model is set; see the module doc for the rules.
    pub(crate) fn resolve(env: &Env) -> Result<Option<Self>, EmbeddingSettingsError> {
        let (url, model) = match (env.get(URL_VAR), env.get(MODEL_VAR)) {
            (None, None) if env.get(PROXY_VAR).is_some() => {
                return Err(EmbeddingSettingsError::Incomplete {
                    set: PROXY_VAR,
                    missing: URL_VAR,
                });
            }
            (None, None) => return Ok(None),
            (Some(_), None) => {
                return Err(EmbeddingSettingsError::Incomplete {
                    set: URL_VAR,
                    missing: MODEL_VAR,
                });
            }
            (None, Some(_)) => {
                return Err(EmbeddingSettingsError::Incomplete {
                    set: MODEL_VAR,
                    missing: URL_VAR,
                });
            }
            (Some(url), Some(model)) => (url, model),
        };
        let url = endpoint(url).map_err(EmbeddingSettingsError::Url)?;
        if model.chars().count() > MAX_MODEL_LEN || model.chars().any(char::is_control) {
            return Err(EmbeddingSettingsError::Model);
        }
        let api_key = match env.get(API_KEY_ENV_VAR) {
            None => None,
            Some(name) if !is_variable_name(name) => {
                return Err(EmbeddingSettingsError::KeyVarName);
            }
            Some(name) => Some(
                env.secret(name)
                    .filter(|key| !key.expose().trim().is_empty())
                    .ok_or(EmbeddingSettingsError::KeyMissing)?,
            ),
        };
        let proxy = match env.get(PROXY_VAR) {
            None => None,
            Some(_) if is_loopback(&url) => return Err(EmbeddingSettingsError::ProxyForLoopback),
            Some(raw) if !is_proxy_url(raw) => return Err(EmbeddingSettingsError::Proxy),
            Some(_) => env.secret(PROXY_VAR),
        };
        Ok(Some(Self {
            url,
            model: model.to_owned(),
            api_key,
            proxy,
        }))
    }

    /// Whether the endpoint is on this machine (`localhost` or a loopback address): such an
    /// endpoint is reached directly, never through a proxy.
    pub(crate) fn is_loopback(&self) -> bool {
        is_loopback(&self.url)
    }
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// A proxy URL the client can use: `http` or `https`, a host, nothing after it but `/`.
fn is_proxy_url(raw: &str) -> bool {
    Url::parse(raw).is_ok_and(|u| {
        matches!(u.scheme(), "http" | "https")
            && u.host().is_some()
            && matches!(u.path(), "" | "/")
            && u.query().is_none()
            && u.fragment().is_none()
    })
}

/// The configured URL as the embeddings endpoint (module doc: base or full URL).
fn endpoint(raw: &str) -> Result<Url, UrlError> {
    let mut url = parse_root(raw)?;
    let path = url.path().trim_end_matches('/').to_owned();
    if path.ends_with("/embeddings") {
        url.set_path(&path);
    } else {
        url.set_path(&format!("{path}/embeddings"));
    }
    Ok(url)
}

/// A portable environment variable name: `[A-Za-z_][A-Za-z0-9_]*`, at most 128 bytes.
pub(crate) fn is_variable_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    name.len() <= 128
        && bytes
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(
        pairs: &[(&str, &str)],
    ) -> Result<Option<EmbeddingSettings>, EmbeddingSettingsError> {
        EmbeddingSettings::resolve(&Env::from_pairs(pairs.iter().copied()))
    }

    #[test]
    fn neither_variable_means_off_and_one_alone_is_refused() {
        assert_eq!(resolve(&[]), Ok(None));
        assert_eq!(resolve(&[(URL_VAR, "  ")]), Ok(None), "blank is unset");
        for (pairs, set) in [
            (vec![(URL_VAR, "http://127.0.0.1:8080/v1")], URL_VAR),
            (vec![(MODEL_VAR, "e5-small")], MODEL_VAR),
        ] {
            let error = resolve(&pairs).expect_err("one alone");
            assert!(
                matches!(error, EmbeddingSettingsError::Incomplete { set: s, .. } if s == set),
                "{error:?}"
            );
            let text = error.to_string();
            assert!(text.contains(URL_VAR) && text.contains(MODEL_VAR), "{text}");
        }
    }

    #[test]
    fn base_and_full_urls_name_the_same_endpoint() {
        for raw in [
            "http://127.0.0.1:8080/v1",
            "http://127.0.0.1:8080/v1/",
            "http://127.0.0.1:8080/v1/embeddings",
            "http://127.0.0.1:8080/v1/embeddings/",
        ] {
            let s = resolve(&[(URL_VAR, raw), (MODEL_VAR, "e5-small")])
                .expect("ok")
                .expect("on");
            assert_eq!(
                s.url.as_str(),
                "http://127.0.0.1:8080/v1/embeddings",
                "{raw}"
            );
            assert_eq!(s.model, "e5-small");
            assert_eq!(s.api_key, None);
        }
        let bare = resolve(&[(URL_VAR, "https://embed.example.net"), (MODEL_VAR, "m")])
            .expect("ok")
            .expect("on");
        assert_eq!(bare.url.as_str(), "https://embed.example.net/embeddings");
        let localhost = resolve(&[(URL_VAR, "http://localhost:11434/v1"), (MODEL_VAR, "m")]);
        assert!(matches!(localhost, Ok(Some(_))), "{localhost:?}");
    }

    #[test]
    fn the_graph_url_rule_applies() {
        for (raw, why) in [
            ("http://embed.example.net/v1", UrlError::Insecure),
            ("http://10.0.0.5:8080/v1", UrlError::Insecure),
            ("ftp://127.0.0.1/v1", UrlError::Insecure),
            ("https://user:pw@embed.example.net/v1", UrlError::Extras),
            ("https://embed.example.net/v1?key=abc", UrlError::Extras),
            ("127.0.0.1:8080/v1", UrlError::Unparsable),
        ] {
            let error = resolve(&[(URL_VAR, raw), (MODEL_VAR, "m")]).expect_err(raw);
            assert_eq!(error, EmbeddingSettingsError::Url(why), "{raw}");
            let text = error.to_string();
            assert!(text.starts_with(URL_VAR), "{text}");
            assert!(!text.contains("abc") && !text.contains("pw"), "{text}");
        }
    }

    #[test]
    fn the_key_comes_from_the_named_variable_and_is_never_shown() {
        let base = [(URL_VAR, "https://embed.example.net/v1"), (MODEL_VAR, "m")];
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut pairs = base.to_vec();
            pairs.extend_from_slice(extra);
            resolve(&pairs)
        };
        let s = with(&[
            (API_KEY_ENV_VAR, "EMBED_KEY"),
            ("EMBED_KEY", "sk-fictional-123"),
        ])
        .expect("ok")
        .expect("on");
        assert_eq!(
            s.api_key.as_ref().map(Secret::expose),
            Some("sk-fictional-123")
        );
        assert!(!format!("{s:?}").contains("sk-fictional"), "Debug redacts");
        for extra in [
            vec![(API_KEY_ENV_VAR, "EMBED_KEY")],
            vec![(API_KEY_ENV_VAR, "EMBED_KEY"), ("EMBED_KEY", "")],
            vec![(API_KEY_ENV_VAR, "EMBED_KEY"), ("EMBED_KEY", "   ")],
        ] {
            let error = with(&extra).expect_err("unset or empty key");
            assert_eq!(error, EmbeddingSettingsError::KeyMissing);
            assert!(error.to_string().contains(API_KEY_ENV_VAR));
            assert!(!error.to_string().contains("EMBED_KEY"), "name not shown");
        }
        // The key pasted where its variable's name belongs: refused without echoing it.
        let error = with(&[(API_KEY_ENV_VAR, "sk-fictional-123")]).expect_err("not a name");
        assert_eq!(error, EmbeddingSettingsError::KeyVarName);
        assert!(!error.to_string().contains("sk-fictional"));
    }

    /// Issue 27: a proxy only for a remote endpoint, only the operator's own, never shown.
    #[test]
    fn a_proxy_is_taken_for_a_remote_endpoint_only_and_never_shown() {
        let remote = [(URL_VAR, "https://embed.example.net/v1"), (MODEL_VAR, "m")];
        let with = |url: &'static str, proxy: &'static str| {
            resolve(&[(URL_VAR, url), (MODEL_VAR, "m"), (PROXY_VAR, proxy)])
        };
        assert_eq!(resolve(&remote).expect("ok").expect("on").proxy, None);
        for proxy in [
            "http://127.0.0.1:3128",
            "https://proxy.example.net:8443/",
            "http://user:pw-fictional@proxy.example.net:3128",
        ] {
            let s = with("https://embed.example.net/v1", proxy)
                .expect("ok")
                .expect("on");
            assert_eq!(s.proxy.as_ref().map(Secret::expose), Some(proxy));
            assert!(!s.is_loopback());
            assert!(!format!("{s:?}").contains("pw-fictional"), "Debug redacts");
        }
        for loopback in [
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434/v1",
            "http://[::1]:8080/v1",
        ] {
            assert!(
                resolve(&[(URL_VAR, loopback), (MODEL_VAR, "m")])
                    .expect("ok")
                    .expect("on")
                    .is_loopback()
            );
            let error = with(loopback, "http://127.0.0.1:3128").expect_err(loopback);
            assert_eq!(error, EmbeddingSettingsError::ProxyForLoopback);
            assert!(error.to_string().contains(PROXY_VAR));
        }
        for bad in [
            "socks5://127.0.0.1:1080",
            "proxy.example.net:3128",
            "http://proxy.example.net:3128/path",
            "http://proxy.example.net:3128?secret-fictional=1",
            "http://proxy.example.net:3128#secret-fictional",
            "not a url secret-fictional",
        ] {
            let error = with("https://embed.example.net/v1", bad).expect_err(bad);
            assert_eq!(error, EmbeddingSettingsError::Proxy, "{bad}");
            assert!(!error.to_string().contains("secret-fictional"), "{error}");
        }
        assert_eq!(
            resolve(&[(PROXY_VAR, "http://127.0.0.1:3128")]),
            Err(EmbeddingSettingsError::Incomplete {
                set: PROXY_VAR,
                missing: URL_VAR
            }),
            "a proxy for no endpoint"
        );
    }

    #[test]
    fn model_names_are_bounded_and_printable() {
        let url = (URL_VAR, "https://embed.example.net/v1");
        assert_eq!(
            resolve(&[url, (MODEL_VAR, "e5\u{7}small")]),
            Err(EmbeddingSettingsError::Model)
        );
        let long = "m".repeat(MAX_MODEL_LEN + 1);
        assert_eq!(
            resolve(&[url, (MODEL_VAR, long.as_str())]),
            Err(EmbeddingSettingsError::Model)
        );
    }
}
