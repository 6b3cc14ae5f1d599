//! Delegated OAuth for personal mailboxes (issue 37): the operator signs in once per alias
//! (`mailgate auth login`), and mailgate keeps the grant and refreshes its access tokens.
//!
//! - `account`: one alias's sign-in as its config and the gates decide it (binding, scopes,
//!   token client).
//! - `grants`: the grant store, one encrypted, owner-checked file per alias in the state folder.
//! - `shared`: the same sealed grants as rows of a shared database, for instances without a
//!   shared state folder.
//! - `scopes`: what a sign-in asks for, decided by the catalog (`policy/delegated.json`).
//! - `wire`: the token and device-authorization endpoints' responses, parsed into typed
//!   outcomes (untrusted bytes: fuzzed).
//! - `endpoints`: where each provider's authorization, token, device and revocation
//!   endpoints are (`oidc`: its discovery document).
//! - `client`: the requests to those endpoints (device flow, code exchange, refresh, revoke).
//! - `pkce`: the authorization-code flow's proof key (RFC 7636, S256).
//! - `loopback`: the `--browser` sign-in's one-shot loopback redirect receiver (RFC 8252).
//! - `identity`: who signed in (the ID token's claims) and whether that account may hold the
//!   alias's grant.
//! - `source`: an alias's access tokens, refreshed ahead of expiry, once for all callers.

pub(crate) mod account;
pub(crate) mod client;
pub(crate) mod endpoints;
pub(crate) mod grants;
pub(crate) mod identity;
pub(crate) mod loopback;
pub(crate) mod pkce;
pub(crate) mod scopes;
pub(crate) mod shared;
pub(crate) mod source;
pub(crate) mod wire;
