//! One alias's delegated sign-in, as its configuration and the gates decide it (issue 37): the
//! grant's binding, the scopes the catalog needs, and the token client, built once here for
//! `mailgate auth` and for the backends the server opens.
//!
//! Invariants:
//! - The scopes come from `scopes::requested` for Microsoft and Google (the catalog's, never
//!   the file's) and from the config for a generic `oidc` provider, with `openid` added when
//!   missing: the sign-in's account check needs an ID token.
//! - The server never touches the network to start: an `oidc` provider's discovery document is
//!   fetched at the first refresh (`LazyRefresher`), so a provider that is down makes the calls
//!   that need it fail as unavailable, not the whole server.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::OnceCell;

use super::client::{ClientError, TokenClient, http_client};
use super::endpoints::{EndpointError, Endpoints};
use super::grants::{GrantBinding, RefreshToken};
use super::scopes::{self, ScopeTarget};
use super::source::{RefreshFault, Refresher};
use super::wire::{TokenOutcome, WireError};
use crate::address::EmailAddress;
use crate::config::env::{Env, Secret};
use crate::config::graph::LOGIN_URL_VAR;
use crate::config::{BackendSpec, MailboxEntry, OAuthProvider, OAuthSpec};
use crate::gates::Gates;

/// Google's issuer, the authority a Google grant is bound to.
const GOOGLE_AUTHORITY: &str = "https://accounts.google.com";

/// Why an alias's sign-in cannot be set up (before any request).
#[derive(Debug, thiserror::Error)]
pub(crate) enum AccountError {
    #[error(
        "alias {alias}: backend.auth names clientSecretEnv {var}, which is not set in the \
         environment"
    )]
    SecretMissing { alias: String, var: String },
    #[error("alias {alias}: provider google signs in IMAP mailboxes only (Gmail has no Graph)")]
    GoogleNeedsImap { alias: String },
    #[error("alias {alias}: the sign-in's HTTP client could not be built")]
    Http { alias: String },
}

/// What protocol the alias's backend speaks with its grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    Graph,
    Imap,
}

/// Everything one alias's sign-in and token source need.
pub(crate) struct DelegatedAccount {
    pub(crate) binding: GrantBinding,
    pub(crate) scopes: Vec<String>,
    pub(crate) spec: OAuthSpec,
    pub(crate) protocol: Protocol,
    /// The mailbox address the alias pins.
    pub(crate) mailbox: EmailAddress,
    http: reqwest::Client,
    secret: Option<Secret>,
    /// The one variable the endpoints read (`MAILGATE_GRAPH_LOGIN_URL`), copied alone: the
    /// account never holds the process's secrets.
    endpoint_env: Env,
}

impl DelegatedAccount {
    /// The sign-in of `entry` under `gates`. `Ok(None)` for a mailbox without `backend.auth`.
    pub(crate) fn of(
        entry: &MailboxEntry,
        gates: &Gates,
        env: &Env,
    ) -> Result<Option<DelegatedAccount>, AccountError> {
        let alias = entry.alias.to_string();
        let (spec, protocol) = match &entry.backend {
            BackendSpec::Graph { auth: Some(spec) } => (spec, Protocol::Graph),
            BackendSpec::Imap {
                auth: Some(spec), ..
            } => (spec, Protocol::Imap),
            _ => return Ok(None),
        };
        let writes = gates.writes && entry.access != crate::config::Access::Read;
        let send = gates
            .send
            .as_ref()
            .is_some_and(|send| send.from_alias == entry.alias);
        let (scopes, authority) = match (spec.provider(), protocol) {
            (OAuthProvider::Microsoft { tenant }, _) => {
                let target = match protocol {
                    Protocol::Graph if spec.delegated_from().is_some() => {
                        ScopeTarget::MicrosoftGraphShared
                    }
                    Protocol::Graph => ScopeTarget::MicrosoftGraph,
                    Protocol::Imap => ScopeTarget::MicrosoftImap,
                };
                (
                    scopes::requested(target, writes, send),
                    tenant.as_str().to_owned(),
                )
            }
            (OAuthProvider::Google, Protocol::Imap) => (
                scopes::requested(ScopeTarget::GoogleImap, writes, send),
                GOOGLE_AUTHORITY.to_owned(),
            ),
            (OAuthProvider::Google, Protocol::Graph) => {
                return Err(AccountError::GoogleNeedsImap { alias });
            }
            (OAuthProvider::Oidc { issuer, scopes }, _) => {
                let mut wanted: Vec<String> = scopes.as_slice().to_vec();
                if !wanted.iter().any(|s| s == "openid") {
                    wanted.insert(0, "openid".to_owned());
                }
                (wanted, issuer.as_str().to_owned())
            }
        };
        let secret = match spec.client_secret_env() {
            Some(var) => Some(env.secret(var).ok_or_else(|| AccountError::SecretMissing {
                alias: alias.clone(),
                var: var.to_owned(),
            })?),
            None => None,
        };
        let http = http_client().map_err(|_| AccountError::Http {
            alias: alias.clone(),
        })?;
        Ok(Some(DelegatedAccount {
            binding: GrantBinding {
                alias,
                provider: spec.provider().name().to_owned(),
                client_id: spec.client_id().to_owned(),
                authority,
            },
            scopes,
            spec: spec.clone(),
            protocol,
            mailbox: entry.address.clone(),
            http,
            secret,
            endpoint_env: Env::from_pairs(
                env.get(LOGIN_URL_VAR)
                    .map(|url| (LOGIN_URL_VAR, url.to_owned())),
            ),
        }))
    }

    pub(crate) fn alias(&self) -> &str {
        &self.binding.alias
    }

    /// The token client, its endpoints resolved now (`oidc`: discovery, a request).
    pub(crate) async fn client(&self) -> Result<TokenClient, EndpointError> {
        let endpoints =
            Endpoints::resolve(self.spec.provider(), &self.endpoint_env, &self.http).await?;
        Ok(TokenClient::new(
            self.http.clone(),
            endpoints,
            self.spec.client_id(),
            self.secret.clone(),
        ))
    }

    /// The refresher the token source uses: it resolves the endpoints at its first refresh.
    pub(crate) fn refresher(self: &Arc<Self>) -> Arc<dyn Refresher> {
        Arc::new(LazyRefresher {
            account: Arc::clone(self),
            client: OnceCell::new(),
        })
    }
}

/// A token client made on first use (see the module invariants).
struct LazyRefresher {
    account: Arc<DelegatedAccount>,
    client: OnceCell<TokenClient>,
}

impl Refresher for LazyRefresher {
    fn refresh<'a>(
        &'a self,
        token: &'a RefreshToken,
        scopes: &'a [String],
    ) -> BoxFuture<'a, Result<TokenOutcome, RefreshFault>> {
        Box::pin(async move {
            let client = self
                .client
                .get_or_try_init(|| self.account.client())
                .await
                .map_err(|e| match e {
                    EndpointError::Discovery(e) => fault(&e),
                    // A login URL the config checks refused would have stopped startup.
                    EndpointError::LoginUrl(_) => RefreshFault::Malformed,
                })?;
            client.refresh(token, scopes).await.map_err(|e| fault(&e))
        })
    }
}

/// The class of a token client failure, for the token source.
fn fault(error: &ClientError) -> RefreshFault {
    match error {
        ClientError::Timeout => RefreshFault::Timeout,
        ClientError::Wire(WireError::UnexpectedStatus(status)) if *status >= 500 => {
            RefreshFault::Unavailable
        }
        ClientError::Wire(_) | ClientError::TooLarge => RefreshFault::Malformed,
        _ => RefreshFault::Unavailable,
    }
}
