//! What the delegated backends share (issue 37): an alias's token source as they use it
//! ([`DelegatedBearer`]), the one mapping of a token failure to a backend class
//! ([`token_error`]), and the SASL initial responses that carry a bearer token to an IMAP or
//! SMTP server (XOAUTH2, and OAUTHBEARER of RFC 7628).
//!
//! Invariants:
//! - A token is only ever exposed into the request or SASL exchange that carries it: nothing
//!   here formats one into a log line or an error, and logs name the alias and a class, never
//!   an address.
//! - A grant the provider refused (or that was never made) is [`BackendError::AuthRequired`]
//!   naming the alias, so the tool answers `AUTH_REQUIRED` (`mailgate auth login ALIAS`) and a
//!   search `SEARCH_FAILED`, never an empty mailbox; every other token failure keeps its class.

use std::fmt;
use std::sync::Arc;

use super::BackendError;
use crate::delegated::grants::AccessToken;
use crate::delegated::source::{DelegatedTokens, TokenError};

/// One alias's delegated tokens, shared by its backend (Graph, or IMAP) and its SMTP sender.
#[derive(Clone)]
pub(crate) struct DelegatedBearer {
    alias: String,
    tokens: Arc<DelegatedTokens>,
}

impl fmt::Debug for DelegatedBearer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelegatedBearer")
            .field("alias", &self.alias)
            .finish_non_exhaustive()
    }
}

impl DelegatedBearer {
    pub(crate) fn new(alias: impl Into<String>, tokens: Arc<DelegatedTokens>) -> Self {
        Self {
            alias: alias.into(),
            tokens,
        }
    }

    /// The alias the tokens are for (what failures and logs name).
    pub(crate) fn alias(&self) -> &str {
        &self.alias
    }

    /// A token valid for a while yet, or the failure's backend class ([`token_error`]).
    pub(crate) async fn get(&self) -> Result<AccessToken, BackendError> {
        self.tokens
            .get()
            .await
            .map_err(|error| token_error(&self.alias, error))
    }

    /// A server refused `stale`: the next [`get`](Self::get) refreshes (once for a burst).
    pub(crate) async fn invalidate(&self, stale: &AccessToken) {
        self.tokens.invalidate(stale).await;
    }

    /// Requests sent to the token endpoint so far (tests).
    #[cfg(test)]
    pub(crate) fn refreshes(&self) -> u64 {
        self.tokens.refreshes()
    }
}

/// The backend class of a token failure of `alias`: the one place it is decided.
///
/// - `AuthRequired` → [`BackendError::AuthRequired`] (the alias it names);
/// - `Unavailable`, `Timeout`, `Malformed` → the same class (the grant is kept; later works);
/// - `ClientRefused` (the app registration: a configuration problem) and `Store` (the grant
///   file, its folder or key refused) → [`BackendError::Unauthorised`], logged at warn with the
///   alias and the class.
pub(crate) fn token_error(alias: &str, error: TokenError) -> BackendError {
    match error {
        TokenError::AuthRequired { alias, why } => {
            tracing::info!(
                alias = alias.as_str(),
                class = "auth_required",
                %why,
                "the delegated alias must be signed in again"
            );
            BackendError::AuthRequired(alias)
        }
        TokenError::Unavailable => BackendError::Unavailable,
        TokenError::Timeout => BackendError::Timeout,
        TokenError::Malformed => BackendError::Malformed,
        TokenError::ClientRefused { code } => {
            tracing::warn!(
                alias,
                class = "client_refused",
                code,
                "the token endpoint refused the app registration; check backend.auth"
            );
            BackendError::Unauthorised
        }
        TokenError::Store(store) => {
            // The grant store's messages name the alias and the rule, never a token, an address
            // or a host path.
            tracing::warn!(
                alias,
                class = "grant_store",
                error = %store,
                "the alias's grant could not be read or saved"
            );
            BackendError::Unauthorised
        }
    }
}

/// The SASL XOAUTH2 initial response (Google's and Microsoft's mechanism):
/// `user=USER^Aauth=Bearer TOKEN^A^A`, before base64 (the protocol library encodes it).
pub(crate) fn xoauth2_response(user: &str, token: &str) -> String {
    format!("user={user}\x01auth=Bearer {token}\x01\x01")
}

/// The SASL OAUTHBEARER initial client response (RFC 7628 §3.1): the GS2 header naming the
/// authorization identity (`n,a=USER,`: no channel binding), then the `auth` key-value pair,
/// each pair ended by `^A` and the whole by another `^A`. `,` and `=` in the user name are
/// escaped as RFC 5801's `saslname` says (`=2C`, `=3D`).
pub(crate) fn oauthbearer_response(user: &str, token: &str) -> String {
    let user = user.replace('=', "=3D").replace(',', "=2C");
    format!("n,a={user},\x01auth=Bearer {token}\x01\x01")
}

/// What a client answers to an OAUTHBEARER error challenge (RFC 7628 §3.2.3): a lone `^A`, so
/// the server ends the exchange with its failure.
pub(crate) const OAUTHBEARER_ERROR_REPLY: &str = "\x01";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delegated::source::AuthRequiredWhy;

    #[test]
    fn oauthbearer_initial_response_is_rfc_7628s_bytes() {
        assert_eq!(
            oauthbearer_response(
                "user@example.com",
                "vF9dft4qmTc2Nvb3RlckBhbHRhdmlzdGEuY29tCg=="
            ),
            "n,a=user@example.com,\x01auth=Bearer vF9dft4qmTc2Nvb3RlckBhbHRhdmlzdGEuY29tCg==\x01\x01"
        );
        assert_eq!(
            oauthbearer_response("odd,na=me@example.com", "t").as_bytes(),
            b"n,a=odd=2Cna=3Dme@example.com,\x01auth=Bearer t\x01\x01"
        );
        assert_eq!(OAUTHBEARER_ERROR_REPLY.as_bytes(), [0x01]);
    }

    #[test]
    fn xoauth2_initial_response() {
        assert_eq!(
            xoauth2_response("ops@example.org", "ya29.token").as_bytes(),
            b"user=ops@example.org\x01auth=Bearer ya29.token\x01\x01"
        );
    }

    #[test]
    fn token_failures_map_to_one_class_each() {
        let auth = token_error(
            "work",
            TokenError::AuthRequired {
                alias: "work".to_owned(),
                why: AuthRequiredWhy::Refused,
            },
        );
        assert!(
            matches!(&auth, BackendError::AuthRequired(alias) if alias == "work"),
            "{auth:?}"
        );
        assert!(matches!(
            token_error("work", TokenError::Unavailable),
            BackendError::Unavailable
        ));
        assert!(matches!(
            token_error("work", TokenError::Timeout),
            BackendError::Timeout
        ));
        assert!(matches!(
            token_error("work", TokenError::Malformed),
            BackendError::Malformed
        ));
        assert!(matches!(
            token_error(
                "work",
                TokenError::ClientRefused {
                    code: "invalid_client"
                }
            ),
            BackendError::Unauthorised
        ));
        assert!(matches!(
            token_error(
                "work",
                TokenError::Store(crate::delegated::grants::GrantError::Random)
            ),
            BackendError::Unauthorised
        ));
    }
}

/// A delegated alias for the backends' tests: a grant store in a private tempdir and a fake
/// token endpoint that hands out `del-1`, `del-2`, … (one per refresh), or refuses the grant.
#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "the fixture makes its tempdir private (0700) so the state folder checks pass"
)]
pub(crate) mod testing {
    use std::os::unix::fs::PermissionsExt as _;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use chrono::Utc;
    use futures::future::BoxFuture;

    use super::DelegatedBearer;
    use crate::delegated::grants::{Grant, GrantBinding, GrantStore, RefreshToken};
    use crate::delegated::source::{DelegatedTokens, RefreshFault, Refresher};
    use crate::delegated::wire::{self, TokenOutcome};

    /// The fake token endpoint.
    pub(crate) struct FakeEndpoint {
        calls: AtomicUsize,
        /// Answer `invalid_grant` (a revoked grant) from now on.
        revoked: AtomicBool,
    }

    impl Refresher for FakeEndpoint {
        fn refresh<'a>(
            &'a self,
            _: &'a RefreshToken,
            _: &'a [String],
        ) -> BoxFuture<'a, Result<TokenOutcome, RefreshFault>> {
            Box::pin(async move {
                let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
                let (status, body) = if self.revoked.load(Ordering::SeqCst) {
                    (400, serde_json::json!({"error": "invalid_grant"}))
                } else {
                    (
                        200,
                        serde_json::json!({
                            "access_token": format!("del-{n}"), "token_type": "Bearer",
                            "expires_in": 3600,
                        }),
                    )
                };
                let body = serde_json::to_vec(&body).expect("json");
                Ok(
                    wire::parse_token_response(status, Some("application/json"), &body)
                        .expect("a well-formed answer"),
                )
            })
        }
    }

    /// One alias's delegated sign-in (see the module doc).
    pub(crate) struct FakeSignIn {
        _tmp: tempfile::TempDir,
        pub(crate) bearer: DelegatedBearer,
        endpoint: Arc<FakeEndpoint>,
    }

    impl FakeSignIn {
        /// `alias`, signed in (a grant on file).
        pub(crate) fn signed_in(alias: &str) -> FakeSignIn {
            FakeSignIn::new(alias, true)
        }

        /// `alias` with no grant: every token request is `AuthRequired`.
        pub(crate) fn not_signed_in(alias: &str) -> FakeSignIn {
            FakeSignIn::new(alias, false)
        }

        fn new(alias: &str, signed_in: bool) -> FakeSignIn {
            let tmp = tempfile::tempdir().expect("tempdir");
            std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o700))
                .expect("chmod");
            let state =
                crate::path_guard::open_state_dir(&tmp.path().join("state"), true).expect("state");
            let store = Arc::new(GrantStore::open(&state, None, true).expect("store"));
            let binding = GrantBinding {
                alias: alias.to_owned(),
                provider: "microsoft".to_owned(),
                client_id: "00000000-0000-0000-0000-00000000c1d0".to_owned(),
                authority: "consumers".to_owned(),
            };
            if signed_in {
                let now = Utc::now();
                store
                    .save(&Grant {
                        binding: binding.clone(),
                        refresh_token: RefreshToken::new("fake-refresh-token".to_owned()),
                        account: "robin@example.com".to_owned(),
                        scopes: vec!["offline_access".to_owned()],
                        obtained_at: now,
                        refreshed_at: now,
                        access: None,
                        refused_at: None,
                    })
                    .expect("save");
            }
            let endpoint = Arc::new(FakeEndpoint {
                calls: AtomicUsize::new(0),
                revoked: AtomicBool::new(false),
            });
            let refresher: Arc<dyn Refresher> = Arc::clone(&endpoint) as _;
            let tokens =
                DelegatedTokens::new(store, binding, vec!["offline_access".to_owned()], refresher);
            FakeSignIn {
                _tmp: tmp,
                bearer: DelegatedBearer::new(alias, Arc::new(tokens)),
                endpoint,
            }
        }

        /// Refreshes asked of the fake endpoint so far.
        pub(crate) fn refreshes(&self) -> usize {
            self.endpoint.calls.load(Ordering::SeqCst)
        }

        /// The provider revokes the grant: the next refresh is `invalid_grant`.
        pub(crate) fn revoke(&self) {
            self.endpoint.revoked.store(true, Ordering::SeqCst);
        }
    }
}
