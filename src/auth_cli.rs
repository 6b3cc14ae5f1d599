//! `mailgate auth login|status|logout`: the operator signs an alias in once, sees who is signed
//! in, and signs it out (issue 37). Never an MCP tool: a model cannot start a sign-in.
//!
//! Invariants:
//! - A grant is saved only after the ID token's account is the alias's mailbox address or its
//!   `delegatedFrom` (`delegated::identity`); otherwise it is revoked where the provider can,
//!   dropped, and the login fails naming the alias and the rule.
//! - Output names aliases, providers, scopes, times and the signed-in account (the operator's
//!   own terminal asks who is signed in); never a token, code verifier or device code. The user
//!   code and the verification URL are printed: the operator needs them, and they are worthless
//!   once the sign-in ends. Logs get the alias and outcome class only.
//! - Exit codes: 0 done, 1 refused or failed (the message says which rule), 2 usage.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use clap::Subcommand;

use crate::alias::Alias;
use crate::config::env::Env;
use crate::config::{OAuthProvider, Settings};
use crate::console::write_out;
use crate::delegated::account::{DelegatedAccount, Protocol};
use crate::delegated::client::{DeviceWait, RevokeOutcome, TokenClient};
use crate::delegated::endpoints::IssuerRule;
use crate::delegated::grants::{CachedAccess, GRANTS_DIR, Grant};
use crate::delegated::identity::{self, Expectation, Holder};
use crate::delegated::loopback::{LoopbackReceiver, authorization_url};
use crate::delegated::pkce::{Pkce, State};
use crate::delegated::source::GrantPlace;
use crate::delegated::wire::{self, DeviceOutcome, TokenOutcome};
use crate::error::StartupError;
use crate::gates::Gates;
use crate::startup::GrantPlaces;

/// How long the `--browser` sign-in waits for the redirect.
const BROWSER_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

#[derive(Subcommand)]
pub(crate) enum AuthCommand {
    /// Sign the operator in for ALIAS and keep the grant (device code by default)
    ///
    /// Prints a URL and a code to enter there; `--browser` prints a URL to open instead and
    /// waits for the provider's redirect to 127.0.0.1 (authorization code with PKCE). The
    /// account signed in must be the alias's address or its configured delegatedFrom.
    Login {
        alias: String,
        /// Sign in in a browser on this machine (loopback redirect) instead of a device code
        #[arg(long)]
        browser: bool,
    },
    /// Who is signed in per alias (never a token), the granted scopes and the last refresh
    Status { alias: Option<String> },
    /// Revoke ALIAS's grant where the provider can (RFC 7009), then delete it
    Logout { alias: String },
}

/// Runs one `mailgate auth` command and returns the exit code.
pub(crate) async fn run(
    command: AuthCommand,
    env: &Env,
    settings: &Settings,
    gates: &Gates,
) -> Result<i32, StartupError> {
    let shared = crate::index::store::postgres::resolve(env)?;
    match command {
        AuthCommand::Login { alias, browser } => {
            let (account, entry) = account(&alias, env, settings, gates)?;
            let places = GrantPlaces::open(env, settings, shared.as_ref(), true)?
                .ok_or_else(|| usage("the grant store could not be created".to_owned()))?;
            login(&account, &places.place(settings, entry), browser).await
        }
        AuthCommand::Status { alias } => {
            let places = GrantPlaces::open(env, settings, shared.as_ref(), false)?;
            status(alias.as_deref(), env, settings, gates, places.as_ref()).await
        }
        AuthCommand::Logout { alias } => {
            let (account, entry) = account(&alias, env, settings, gates)?;
            let places = GrantPlaces::open(env, settings, shared.as_ref(), false)?;
            let place = places.as_ref().map(|p| p.place(settings, entry));
            logout(&account, place.as_ref()).await
        }
    }
}

fn usage(message: String) -> StartupError {
    StartupError::Usage(message)
}

/// The alias's delegated sign-in and its mailbox, or a usage error naming why there is none.
fn account<'s>(
    alias: &str,
    env: &Env,
    settings: &'s Settings,
    gates: &Gates,
) -> Result<(Arc<DelegatedAccount>, &'s crate::config::MailboxEntry), StartupError> {
    let name = Alias::parse(alias).map_err(|e| usage(format!("alias {alias:?}: {e}")))?;
    let entry = settings
        .config
        .mailbox(&name)
        .ok_or_else(|| usage(format!("plugin.json lists no mailbox {name}")))?;
    match DelegatedAccount::of(entry, gates, env) {
        Ok(Some(account)) => Ok((Arc::new(account), entry)),
        Ok(None) => Err(usage(format!(
            "{name} has no backend.auth in plugin.json: it signs in with what its backend block \
             names, not with `mailgate auth`"
        ))),
        Err(e) => Err(usage(e.to_string())),
    }
}

/// Whether the granted scopes cover `wanted`. Providers answer in their own spelling: Microsoft
/// names Graph scopes without their resource prefix (`Mail.Read`) and leaves the OpenID ones
/// out of `scope`, so those are not compared, and a name matches with or without its prefix.
fn covered(granted: &[String], wanted: &str) -> bool {
    const IDENTITY: [&str; 4] = ["openid", "email", "profile", "offline_access"];
    if IDENTITY.contains(&wanted) {
        return true;
    }
    let short = wanted.rsplit_once('/').map_or(wanted, |(_, name)| name);
    granted.iter().any(|g| {
        g.eq_ignore_ascii_case(wanted) || (!short.is_empty() && g.eq_ignore_ascii_case(short))
    })
}

/// A failed login: one line to the operator, exit 1.
fn refuse(alias: &str, why: &str) -> Result<i32, StartupError> {
    tracing::warn!(alias, "auth login refused");
    write_out(&format!("{alias}: sign-in refused: {why}"))?;
    Ok(1)
}

async fn login(
    account: &Arc<DelegatedAccount>,
    place: &GrantPlace,
    browser: bool,
) -> Result<i32, StartupError> {
    let alias = account.alias();
    let client = account
        .client()
        .await
        .map_err(|e| usage(format!("{alias}: the provider's endpoints: {e}")))?;
    let started = Utc::now();
    let outcome = if browser {
        browser_sign_in(account, &client).await?
    } else {
        device_sign_in(account, &client).await?
    };
    let granted = match outcome {
        Ok(granted) => granted,
        Err(why) => return refuse(alias, &why),
    };
    // Who signed in, before anything is kept.
    let holder = match check_account(account, &client, &granted, Utc::now()) {
        Ok(found) => found,
        Err(why) => {
            discard(&client, granted).await;
            return refuse(alias, &why);
        }
    };
    let Some(refresh_token) = granted.refresh_token else {
        return refuse(
            alias,
            "the provider issued no refresh token, so mailgate could not renew access (the \
             sign-in must grant offline access: offline_access, or Google's consent prompt)",
        );
    };
    let scopes = granted.scope.unwrap_or_else(|| account.scopes.clone());
    let grant = Grant {
        binding: account.binding.clone(),
        refresh_token,
        account: holder.0.as_str().to_owned(),
        scopes: scopes.clone(),
        obtained_at: started,
        refreshed_at: started,
        access: Some(CachedAccess {
            token: crate::delegated::grants::AccessToken::new(
                granted.access_token.expose().to_owned(),
            ),
            obtained_at: started,
            expires_at: started
                + chrono::TimeDelta::seconds(
                    i64::try_from(granted.expires_in_secs).unwrap_or(i64::MAX / 2),
                ),
        }),
        refused_at: None,
    };
    let account_name = grant.account.clone();
    place
        .save(grant)
        .await
        .map_err(|e| usage(format!("{alias}: the grant could not be saved: {e}")))?;
    tracing::info!(alias, "auth login: grant saved");
    let role = match holder.1 {
        Holder::Mailbox => "the mailbox's own account",
        Holder::Delegate => "the delegatedFrom account, for the shared mailbox",
    };
    let kept = match place {
        GrantPlace::Folder(_) => format!("the state folder's {GRANTS_DIR}/"),
        GrantPlace::Shared { .. } => "the shared database".to_owned(),
    };
    write_out(&format!(
        "{alias}: signed in as {account_name} ({role}); scopes: {}; grant saved in {kept}",
        scopes.join(" ")
    ))?;
    Ok(0)
}

/// The device authorization grant (RFC 8628): print where to go and the code, then poll.
async fn device_sign_in(
    account: &DelegatedAccount,
    client: &TokenClient,
) -> Result<Result<wire::Grant, String>, StartupError> {
    let alias = account.alias();
    let started = match client.start_device(&account.scopes).await {
        Ok(DeviceOutcome::Started(started)) => started,
        Ok(DeviceOutcome::Refused(refusal)) => {
            return Ok(Err(format!(
                "the provider refused to start a device sign-in ({}{}); `--browser` signs in \
                 with a loopback redirect instead",
                refusal.code.as_str(),
                described(refusal.description.as_ref())
            )));
        }
        Err(e) => return Ok(Err(format!("the device sign-in could not start: {e}"))),
    };
    let complete = started
        .verification_uri_complete
        .as_ref()
        .map(|u| format!("\n  (or open {u})"))
        .unwrap_or_default();
    write_out(&format!(
        "{alias}: to sign in, open {}\n  and enter the code: {}{complete}\n  waiting up to {} \
         minutes...",
        started.verification_uri,
        started.user_code.expose(),
        started.expires_in_secs.div_ceil(60)
    ))?;
    Ok(match client.wait_for_device_grant(&started).await {
        Ok(DeviceWait::Granted(grant)) => Ok(grant),
        Ok(DeviceWait::Denied) => Err("the sign-in was declined at the provider".to_owned()),
        Ok(DeviceWait::Expired) => Err("the code expired before the sign-in finished".to_owned()),
        Ok(DeviceWait::Refused(refusal)) => Err(format!(
            "the provider refused the sign-in ({}{})",
            refusal.code.as_str(),
            described(refusal.description.as_ref())
        )),
        Err(e) => Err(format!("the sign-in could not finish: {e}")),
    })
}

/// The authorization-code grant with PKCE and a loopback redirect (RFC 8252).
async fn browser_sign_in(
    account: &DelegatedAccount,
    client: &TokenClient,
) -> Result<Result<wire::Grant, String>, StartupError> {
    let alias = account.alias();
    let random = |e| usage(format!("the operating system's random source failed: {e}"));
    let pkce = Pkce::generate().map_err(random)?;
    let state = State::generate().map_err(random)?;
    let receiver = LoopbackReceiver::bind()
        .await
        .map_err(|e| usage(format!("{alias}: the loopback redirect: {e}")))?;
    let redirect = receiver.redirect_uri().to_owned();
    let hint = account
        .spec
        .delegated_from()
        .unwrap_or(&account.mailbox)
        .as_str()
        .to_owned();
    let url = authorization_url(
        client.endpoints(),
        account.spec.client_id(),
        &redirect,
        &account.scopes,
        &pkce,
        &state,
        Some(&hint),
    );
    write_out(&format!(
        "{alias}: to sign in, open this URL in a browser on this machine:\n  {url}\n  waiting \
         up to {} minutes for the redirect to {redirect} ...",
        BROWSER_WAIT.as_secs() / 60
    ))?;
    let code = match receiver
        .wait(&state, tokio::time::Instant::now() + BROWSER_WAIT)
        .await
    {
        Ok(code) => code,
        Err(e) => return Ok(Err(format!("the browser sign-in did not finish: {e}"))),
    };
    Ok(
        match client
            .exchange_code(&code, pkce.verifier(), &redirect)
            .await
        {
            Ok(TokenOutcome::Granted(grant)) => Ok(grant),
            Ok(TokenOutcome::Refused(refusal)) => Err(format!(
                "the provider refused the code ({}{})",
                refusal.code.as_str(),
                described(refusal.description.as_ref())
            )),
            Err(e) => Err(format!("the code could not be redeemed: {e}")),
        },
    )
}

fn described(description: Option<&wire::Description>) -> String {
    description.map_or_else(String::new, |d| format!(": {}", d.as_str()))
}

/// The signed-in account and how it holds the alias's grant, or the rule it broke.
fn check_account(
    account: &DelegatedAccount,
    client: &TokenClient,
    granted: &wire::Grant,
    now: DateTime<Utc>,
) -> Result<(crate::address::EmailAddress, Holder), String> {
    let rule: &IssuerRule = client.endpoints().issuer();
    let issuer_ok = |iss: &str, tid: Option<&str>| rule.accepts(iss, tid);
    let expect = Expectation {
        client_id: account.spec.client_id(),
        issuer_ok: &issuer_ok,
        preferred_username_names_account: matches!(
            account.spec.provider(),
            OAuthProvider::Microsoft { .. }
        ),
    };
    let who =
        identity::signed_in(granted.id_token.as_ref(), &expect, now).map_err(|e| e.to_string())?;
    let holder = identity::holder(
        &who.account,
        &account.mailbox,
        account.spec.delegated_from(),
    )
    .map_err(|e| e.to_string())?;
    Ok((who.account, holder))
}

/// A grant refused at login is revoked where the provider can, and dropped.
async fn discard(client: &TokenClient, granted: wire::Grant) {
    if let Some(token) = granted.refresh_token
        && client.revoke(&token).await.is_err()
    {
        tracing::warn!("auth login: the refused grant could not be revoked");
    }
}

async fn status(
    only: Option<&str>,
    env: &Env,
    settings: &Settings,
    gates: &Gates,
    places: Option<&GrantPlaces>,
) -> Result<i32, StartupError> {
    let mut lines = Vec::new();
    let mut failed = false;
    for entry in &settings.config.mailboxes {
        let name = entry.alias.to_string();
        if only.is_some_and(|o| o != name) {
            continue;
        }
        let account = match DelegatedAccount::of(entry, gates, env) {
            Ok(Some(account)) => account,
            Ok(None) if only.is_some() => {
                lines.push(format!("{name}: no backend.auth (not a delegated sign-in)"));
                continue;
            }
            Ok(None) => continue,
            Err(e) => {
                failed = true;
                lines.push(format!("{name}: {e}"));
                continue;
            }
        };
        let provider = account.binding.provider.clone();
        let kind = match account.protocol {
            Protocol::Graph => "graph",
            Protocol::Imap => "imap",
        };
        let loaded = match places {
            Some(places) => Some(places.place(settings, entry).load(&account.binding).await),
            None => None,
        };
        let line = match loaded {
            None | Some(Ok(None)) => {
                failed = true;
                format!("{name}: {provider}/{kind}: not signed in (mailgate auth login {name})")
            }
            Some(Err(e)) => {
                failed = true;
                format!(
                    "{name}: {provider}/{kind}: grant refused: {e} (mailgate auth login {name})"
                )
            }
            Some(Ok(Some(grant))) => {
                let wider: Vec<&String> = account
                    .scopes
                    .iter()
                    .filter(|s| !covered(&grant.scopes, s))
                    .collect();
                let mut state = match grant.refused_at {
                    Some(at) => {
                        failed = true;
                        format!(
                            "REFUSED by the provider at {} (revoked or expired): mailgate auth \
                             login {name}",
                            at.to_rfc3339()
                        )
                    }
                    None => "signed in".to_owned(),
                };
                if !wider.is_empty() && grant.refused_at.is_none() {
                    state.push_str(&format!(
                        "; the catalog now also needs {} (mailgate auth login {name})",
                        wider
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(" ")
                    ));
                }
                format!(
                    "{name}: {provider}/{kind}: {state}; account {}; scopes {}; signed in {}; \
                     last refreshed {}",
                    grant.account,
                    grant.scopes.join(" "),
                    grant.obtained_at.to_rfc3339(),
                    grant.refreshed_at.to_rfc3339()
                )
            }
        };
        lines.push(line);
    }
    // A grant whose alias plugin.json no longer lists (renamed or removed): still a live
    // refresh token on disk, so the operator is told where it is.
    // (Only a folder can be listed: row-level security shows a session one mailbox's row.)
    if only.is_none()
        && let Some(GrantPlaces::Folder(store)) = places
        && let Ok(aliases) = store.list()
    {
        for orphan in aliases {
            if !settings
                .config
                .mailboxes
                .iter()
                .any(|m| m.alias.to_string() == orphan)
            {
                failed = true;
                lines.push(format!(
                    "{orphan}: a grant file for an alias plugin.json no longer lists: put the \
                     alias back and run `mailgate auth logout {orphan}` to revoke it, or delete \
                     {GRANTS_DIR}/{orphan}.grant from the state folder"
                ));
            }
        }
    }
    if let Some(o) = only
        && lines.is_empty()
    {
        return Err(usage(format!("plugin.json lists no mailbox {o}")));
    }
    if lines.is_empty() {
        lines.push("no mailbox in plugin.json names backend.auth".to_owned());
    }
    write_out(&lines.join("\n"))?;
    Ok(i32::from(failed))
}

async fn logout(
    account: &DelegatedAccount,
    place: Option<&GrantPlace>,
) -> Result<i32, StartupError> {
    let alias = account.alias();
    let loaded = match place {
        Some(place) => Some(place.load(&account.binding).await),
        None => None,
    };
    let grant = match loaded {
        None | Some(Ok(None)) => {
            write_out(&format!("{alias}: not signed in; nothing to remove"))?;
            return Ok(0);
        }
        Some(Ok(Some(grant))) => Some(grant),
        // A grant this binding cannot open is deleted without revoking: its token is unreadable.
        Some(Err(_)) => None,
    };
    let mut code = 0;
    let revoked = match &grant {
        Some(grant) if grant.refused_at.is_none() => match account.client().await {
            Ok(client) => match client.revoke(&grant.refresh_token).await {
                Ok(RevokeOutcome::Revoked) => "revoked at the provider".to_owned(),
                Ok(RevokeOutcome::NotOffered) => provider_revocation_hint(account),
                Ok(RevokeOutcome::Refused(refusal)) => {
                    code = 1;
                    format!(
                        "the provider refused the revocation ({}); revoke the app's access in \
                         the account's settings",
                        refusal.code.as_str()
                    )
                }
                Err(e) => {
                    code = 1;
                    format!("NOT revoked ({e}); revoke the app's access in the account's settings")
                }
            },
            Err(e) => {
                code = 1;
                format!("NOT revoked (the provider's endpoints: {e})")
            }
        },
        Some(_) => "already refused by the provider".to_owned(),
        None => "its file could not be opened, so it was not revoked".to_owned(),
    };
    if let Some(place) = place {
        place
            .delete(alias)
            .await
            .map_err(|e| usage(format!("{alias}: the grant could not be deleted: {e}")))?;
    }
    tracing::info!(alias, "auth logout: grant deleted");
    write_out(&format!("{alias}: signed out: grant deleted; {revoked}"))?;
    Ok(code)
}

/// Where an operator revokes a grant whose provider has no RFC 7009 endpoint (Microsoft).
fn provider_revocation_hint(account: &DelegatedAccount) -> String {
    match account.spec.provider() {
        OAuthProvider::Microsoft { .. } => "Microsoft offers no revocation endpoint: remove the \
             app at https://account.live.com/consent/Manage (personal account) or \
             https://myapps.microsoft.com (work or school) to revoke it there too"
            .to_owned(),
        _ => "the provider offers no revocation endpoint: remove the app's access in the \
              account's settings to revoke it there too"
            .to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::covered;

    #[test]
    fn granted_scopes_are_compared_in_the_providers_spelling() {
        let granted = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let microsoft = granted(&["Mail.Read", "User.Read"]);
        assert!(covered(&microsoft, "https://graph.microsoft.com/Mail.Read"));
        assert!(covered(&microsoft, "offline_access"));
        assert!(!covered(
            &microsoft,
            "https://graph.microsoft.com/Mail.Send"
        ));
        assert!(!covered(
            &microsoft,
            "https://graph.microsoft.com/Mail.ReadWrite"
        ));
        let google = granted(&["https://mail.google.com/", "openid"]);
        assert!(covered(&google, "https://mail.google.com/"));
        assert!(!covered(&granted(&["mail.read"]), "mail.send"));
    }
}
