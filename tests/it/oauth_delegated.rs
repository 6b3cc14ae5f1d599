//! Delegated OAuth with real parts (issue 37, item 5): the loopback `oidc-provider` of
//! `oauth_provider` as the authorization server, and the loopback Dovecot + Postfix of
//! `scripts/mailserver.sh` checking XOAUTH2 logins by introspecting at that provider. What these
//! tests prove needs nothing of mailgate's sign-in yet: the provider's flows (device
//! authorization, PKCE on a loopback redirect, refresh rotation, revocation) behave as the
//! sign-in will meet them, and a token they give reads the mailbox through mailgate's IMAP
//! backend (`oauth2TokenEnv`, a static XOAUTH2 token) and sends through Postfix submission, until
//! it expires or the account revokes the grant, when the login is refused. The cases of the
//! sign-in itself (refresh by mailgate, single flight, the account binding) build on this.
//!
//! Each test signs in as accounts of its own, the IMAP users it seeds (`t-…@example.org`), so
//! the tests share one provider and one mail server and run in parallel.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::imap_server::{ImapEntry, ImapUser, MailServer, Stored};
use crate::oauth_provider::{ALL_SCOPES, CLIENT_ID, OAuthProvider, fresh_account, pkce};
use crate::util::{Client, World, write_mode};

/// How long a delivery through Postfix and LMTP may take before a test gives up.
pub(crate) const DELIVERY: Duration = Duration::from_secs(30);

/// The mail servers and the provider, or an early return (with the loud SKIP line of whichever
/// cannot run here). Also `auth_login`'s.
macro_rules! both_or_skip {
    ($test:expr) => {
        match (
            crate::imap_server::MailServer::get($test),
            crate::oauth_provider::OAuthProvider::get($test),
        ) {
            (Some(server), Some(provider)) => (server, provider),
            _ => return,
        }
    };
}
pub(crate) use both_or_skip;

/// `plugin.json` with `entry` logging in by XOAUTH2 on IMAP and SMTP with `token` (the
/// `oauth2TokenEnv` of both blocks, in place of the password), the servers' CA copied into the
/// world as `imap_server::imap_config` does; returns the world (with the variable set) and the
/// config path.
fn xoauth2_config(
    server: &MailServer,
    world: World,
    entry: &ImapEntry,
    token: &str,
) -> (World, String) {
    let ca = world.path().join("ca.pem");
    write_mode(&ca, &std::fs::read(&server.ca).unwrap(), 0o600);
    let var = format!("{}_OAUTH2_TOKEN", entry.alias.to_ascii_uppercase());
    let mut mailbox = entry.clone().ca(Some(ca)).json();
    for block in ["imap", "smtp"] {
        let block = mailbox["backend"][block].as_object_mut().unwrap();
        block.remove("passwordEnv");
        block.insert("oauth2TokenEnv".into(), var.clone().into());
    }
    let path = world.path().join("plugin.json");
    write_mode(
        &path,
        json!({ "mailboxes": [mailbox] }).to_string().as_bytes(),
        0o600,
    );
    (world.with(&var, token), path.display().to_string())
}

/// mailgate serving `owner`'s mailbox as `team` with `token` for XOAUTH2.
async fn serve_with_token(
    server: &MailServer,
    world: World,
    owner: &ImapUser,
    token: &str,
) -> (World, Client) {
    let entry = ImapEntry::new(server, "team", owner);
    let (world, config) = xoauth2_config(server, world, &entry, token);
    let c = world.client(&["--config", &config, "serve"]).await;
    (world, c)
}

fn subjects(listing: &Value) -> BTreeSet<String> {
    listing["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("messages: {listing}"))
        .iter()
        .map(|m| m["subject"].as_str().expect("subject").to_owned())
        .collect()
}

/// A listing and a tool call that must be the refused login of today's backend: the listing a
/// failed search (never an empty mailbox), the stats call the AUTH_FAILED error.
async fn assert_login_refused(c: &Client, why: &str) {
    let listing = c
        .ok("list_messages", json!({"mailbox": "team", "criteria": {}}))
        .await;
    assert_eq!(listing["status"], "SEARCH_FAILED", "{why}: {listing}");
    assert!(
        listing["warnings"]
            .as_array()
            .is_some_and(|w| w.contains(&json!("backend_auth_failed"))),
        "{why}: {listing}"
    );
    let code = c
        .tool_error(
            "get_folder_stats",
            json!({"mailbox": "team", "folderId": "inbox"}),
        )
        .await;
    assert_eq!(code, "AUTH_FAILED", "{why}");
}

/// Seeds `owner`'s INBOX with one message (also used by `auth_login`).
pub(crate) async fn seed(owner: &ImapUser, subject: &str) {
    let raw = format!(
        "From: sender@example.org\r\nTo: {}\r\nSubject: {subject}\r\nMessage-ID: <{}@example.org>\r\n\r\nHello.\r\n",
        owner.address,
        subject.replace(' ', "-")
    );
    owner.append("INBOX", raw.as_bytes(), &[]).await;
}

#[expect(
    clippy::print_stderr,
    reason = "the measured time is part of the suite's budget report"
)]
pub(crate) fn took(test: &str, started: Instant) {
    eprintln!("{test}: {:.1} s", started.elapsed().as_secs_f64());
}

/// The device flow end to end with real parts: the operator approves the code at the provider,
/// the ID token names the account (verified email, preferred_username; `sub` is opaque), and the
/// access token reads the mailbox through mailgate over IMAP XOAUTH2 (Dovecot introspects it)
/// and sends through Postfix submission. Once the account revokes the app at the provider, the
/// same token logs in nowhere: a listing is SEARCH_FAILED with backend_auth_failed (never an
/// empty mailbox), a tool AUTH_FAILED, and the refresh token is dead too.
#[tokio::test]
async fn a_device_flow_token_reads_and_sends_over_xoauth2_until_the_grant_is_revoked() {
    const TEST: &str =
        "a_device_flow_token_reads_and_sends_over_xoauth2_until_the_grant_is_revoked";
    let (server, provider) = both_or_skip!(TEST);
    let started = Instant::now();
    let owner = ImapUser::fresh(server, "oauth-device");
    let to = ImapUser::fresh(server, "oauth-device-to");
    seed(&owner, "delegated hello").await;

    let tokens = provider.sign_in(&owner.address, ALL_SCOPES).await;
    let claims = tokens.id_claims();
    assert_eq!(claims["iss"], provider.issuer.as_str(), "{claims}");
    assert_eq!(claims["aud"], CLIENT_ID, "{claims}");
    assert_eq!(claims["email"], owner.address.as_str(), "{claims}");
    assert_eq!(claims["email_verified"], true, "{claims}");
    assert_eq!(
        claims["preferred_username"],
        owner.address.as_str(),
        "{claims}"
    );
    assert!(
        claims["sub"].as_str().is_some_and(|s| !s.contains('@')),
        "the subject is opaque, the email is the account: {claims}"
    );
    let refresh = tokens
        .refresh_token
        .clone()
        .expect("offline_access gives a refresh token");
    assert!(
        tokens.scope.split(' ').any(|s| s == "mail.read"),
        "{tokens:?}"
    );
    let seen = provider.introspect(&tokens.access_token).await;
    assert_eq!(seen["active"], true, "{seen}");
    assert_eq!(
        seen["email"],
        owner.address.as_str(),
        "Dovecot's user: {seen}"
    );

    let world = World::new()
        .with("PLUGIN_ALLOW_SEND", "true")
        .with("OUTLOOK_SEND_FROM", &owner.address)
        .with("OUTLOOK_ALLOWED_SENDERS", &owner.address)
        .with("OUTLOOK_ALLOWED_RECIPIENT_DOMAINS", &server.domain);
    let (_world, c) = serve_with_token(server, world, &owner, &tokens.access_token).await;
    let listing = c
        .ok("list_messages", json!({"mailbox": "team", "criteria": {}}))
        .await;
    assert_eq!(
        subjects(&listing),
        BTreeSet::from(["delegated hello".to_owned()]),
        "{listing}"
    );
    let found = c
        .ok(
            "search_mailbox",
            json!({"mailbox": "team", "criteria": {"query": "delegated"}}),
        )
        .await;
    assert_eq!(found["status"], "FOUND", "{found}");
    let tag = format!("sent with a delegated token {}", std::process::id());
    let sent = c
        .ok(
            "send_email",
            json!({"to": [to.address], "subject": tag, "body": "Through XOAUTH2."}),
        )
        .await;
    assert_eq!(sent["status"], "sent", "{sent}");
    assert_eq!(sent["transport"], "smtp", "{sent}");
    let got = to
        .wait_for("INBOX", DELIVERY, |m: &Stored| m.subject() == tag)
        .await;
    assert_eq!(
        got.header_value("From").as_deref(),
        Some(owner.address.as_str())
    );
    c.close().await;
    let log = std::fs::read_to_string(server.dir.join("log/dovecot.log")).unwrap_or_default();
    assert!(
        log.lines()
            .any(|l| l.contains("method=XOAUTH2") && l.contains(&owner.address)),
        "Dovecot logged the XOAUTH2 login"
    );
    let stats = provider.stats(&owner.address).await;
    assert!(
        stats["introspection"]["active"].as_u64() >= Some(2),
        "IMAP and submission each introspected the token: {stats}"
    );

    assert_eq!(provider.revoke_all(&owner.address).await, 1);
    assert_eq!(
        provider.introspect(&tokens.access_token).await["active"],
        false
    );
    let (_world, c) = serve_with_token(server, World::new(), &owner, &tokens.access_token).await;
    assert_login_refused(&c, "a revoked grant's token").await;
    c.close().await;
    let (status, answer) = provider.refresh(&refresh).await.unwrap_err();
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("invalid_grant")),
        "{answer}"
    );
    took(TEST, started);
}

/// An access token past its lifetime is refused by Dovecot (the provider says inactive), and the
/// refreshed one reads again. The refresh rotates the refresh token (the provider counts exactly
/// one refresh), and the rotated-away token is refused. Replaying it also revokes the whole
/// grant at this provider (oidc-provider's reuse detection), so the new refresh token dies with
/// it: a client that loses the rotated token and retries the old one loses the sign-in, which
/// is why a rotation must be stored before it is used.
#[tokio::test]
async fn an_expired_token_is_refused_and_the_refreshed_one_reads_again() {
    const TEST: &str = "an_expired_token_is_refused_and_the_refreshed_one_reads_again";
    let (server, provider) = both_or_skip!(TEST);
    let started = Instant::now();
    let owner = ImapUser::fresh(server, "oauth-expiry");
    seed(&owner, "before expiry").await;
    provider.set_access_ttl(&owner.address, 2).await;
    let first = provider.sign_in(&owner.address, ALL_SCOPES).await;
    assert_eq!(first.expires_in, 2, "{first:?}");
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    assert_eq!(
        provider.introspect(&first.access_token).await["active"],
        false
    );
    let (_world, c) = serve_with_token(server, World::new(), &owner, &first.access_token).await;
    assert_login_refused(&c, "an expired token").await;
    c.close().await;

    // The refreshed token lives the default minute: long enough for mailgate to start and log in.
    provider.set_access_ttl(&owner.address, 0).await;
    let old_refresh = first.refresh_token.clone().expect("a refresh token");
    let second = provider.refresh(&old_refresh).await.expect("a refresh");
    let new_refresh = second
        .refresh_token
        .clone()
        .expect("a rotated refresh token");
    assert_ne!(new_refresh, old_refresh, "rotated");
    assert_ne!(second.access_token, first.access_token);
    assert_eq!(second.id_claims()["email"], owner.address.as_str());
    let (_world, c) = serve_with_token(server, World::new(), &owner, &second.access_token).await;
    let listing = c
        .ok("list_messages", json!({"mailbox": "team", "criteria": {}}))
        .await;
    assert_eq!(
        subjects(&listing),
        BTreeSet::from(["before expiry".to_owned()]),
        "{listing}"
    );
    c.close().await;
    assert_eq!(
        provider
            .token_calls(&owner.address, "refresh_token", "ok")
            .await,
        1,
        "refreshed once"
    );

    let (status, answer) = provider.refresh(&old_refresh).await.unwrap_err();
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("invalid_grant")),
        "{answer}"
    );
    let (_, answer) = provider.refresh(&new_refresh).await.unwrap_err();
    assert_eq!(
        answer["error"], "invalid_grant",
        "reuse revoked the grant: {answer}"
    );
    assert_eq!(
        provider.introspect(&second.access_token).await["active"],
        false
    );
    assert_eq!(
        provider
            .token_calls(&owner.address, "refresh_token", "error")
            .await,
        2
    );
    took(TEST, started);
}

/// A token is good only for its own account and only with mail.read: another account's token,
/// and a token of the right account with only OpenID scopes, log in nowhere (Dovecot compares
/// the introspected email with the XOAUTH2 user, and requires the scope).
#[tokio::test]
async fn another_accounts_token_or_one_without_mail_read_logs_in_nowhere() {
    const TEST: &str = "another_accounts_token_or_one_without_mail_read_logs_in_nowhere";
    let (server, provider) = both_or_skip!(TEST);
    let started = Instant::now();
    let owner = ImapUser::fresh(server, "oauth-owner");
    seed(&owner, "not for others").await;
    let other = ImapUser::fresh(server, "oauth-other");
    let others = provider.sign_in(&other.address, ALL_SCOPES).await;
    let (_world, c) = serve_with_token(server, World::new(), &owner, &others.access_token).await;
    assert_login_refused(&c, "another account's token").await;
    c.close().await;
    let no_mail = provider
        .sign_in(&owner.address, "openid email profile offline_access")
        .await;
    let (_world, c) = serve_with_token(server, World::new(), &owner, &no_mail.access_token).await;
    assert_login_refused(&c, "a token without mail.read").await;
    c.close().await;
    took(TEST, started);
}

/// `(name, value)` pairs borrowed from owned ones.
fn pairs<'a>(params: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    params.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The provider's flows as mailgate's sign-in will meet them, no mail server needed: the
/// authorization code with PKCE S256 on a loopback redirect of any port (RFC 8252), the code
/// bound to its verifier and usable once, PKCE required and plain refused, a redirect elsewhere
/// refused at the provider; the ID token of whoever signed in (here not the mailbox's owner,
/// what the account binding must refuse); the device flow's refusals (the operator declines, an
/// unknown account, a used code); an account whose email is unverified; RFC 7009 revocation by
/// the client ending the grant's tokens.
#[tokio::test]
async fn pkce_on_a_loopback_redirect_and_the_providers_refusals() {
    const TEST: &str = "pkce_on_a_loopback_redirect_and_the_providers_refusals";
    let Some(provider) = OAuthProvider::get(TEST) else {
        return;
    };
    let started = Instant::now();
    // A port the kernel just handed out: the registration names none (RFC 8252 §7.3).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let authorize = |challenge: Option<(&str, &str)>, redirect: &str, state: &str| {
        let mut params = vec![
            ("client_id", CLIENT_ID.to_owned()),
            ("response_type", "code".to_owned()),
            ("redirect_uri", redirect.to_owned()),
            ("scope", ALL_SCOPES.to_owned()),
            ("state", state.to_owned()),
            // OpenID Connect Core §11: the authorization endpoint honours offline_access only
            // with prompt=consent; without it oidc-provider drops the scope and no refresh
            // token comes (the device flow has no prompt and keeps it).
            ("prompt", "consent".to_owned()),
        ];
        if let Some((challenge, method)) = challenge {
            params.push(("code_challenge", challenge.to_owned()));
            params.push(("code_challenge_method", method.to_owned()));
        }
        params
    };
    let param = |location: &str, name: &str| -> Option<String> {
        reqwest::Url::parse(location)
            .ok()?
            .query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };

    // Signed in as eve@example.org: the code comes back to the loopback redirect with the state
    // and the issuer (RFC 9207).
    let (verifier, challenge) = pkce();
    let params = authorize(Some((&challenge, "S256")), &redirect_uri, "state-1");
    let (status, location) = provider.authorize(&pairs(&params), "eve@example.org").await;
    assert_eq!(status, 303, "{location}");
    assert!(
        location.starts_with(&format!("{redirect_uri}?")),
        "{location}"
    );
    assert_eq!(param(&location, "state").as_deref(), Some("state-1"));
    assert_eq!(
        param(&location, "iss").as_deref(),
        Some(provider.issuer.as_str())
    );
    let code = param(&location, "code").expect("a code");
    let (status, answer) = provider
        .exchange_code(
            &code,
            "a-verifier-that-is-not-the-one-sent-0123456789",
            &redirect_uri,
        )
        .await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("invalid_grant")),
        "{answer}"
    );

    let (status, location) = provider.authorize(&pairs(&params), "eve@example.org").await;
    assert_eq!(status, 303, "{location}");
    let code = param(&location, "code").expect("a code");
    let (status, answer) = provider
        .exchange_code(&code, &verifier, &redirect_uri)
        .await;
    assert_eq!(status, 200, "{answer}");
    let access = answer["access_token"].as_str().expect("a token").to_owned();
    let refresh = answer["refresh_token"]
        .as_str()
        .expect("offline_access")
        .to_owned();
    let id = answer["id_token"].as_str().expect("an ID token");
    let claims: Value = serde_json::from_slice(
        &base64::Engine::decode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            id.split('.').nth(1).unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["email"], "eve@example.org", "{claims}");
    assert_eq!(claims["preferred_username"], "eve@example.org", "{claims}");
    let (status, answer) = provider
        .exchange_code(&code, &verifier, &redirect_uri)
        .await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("invalid_grant")),
        "a code is used once: {answer}"
    );

    // PKCE is required of the public client, and only S256 is accepted.
    let (status, location) = provider
        .authorize(
            &pairs(&authorize(None, &redirect_uri, "s")),
            "eve@example.org",
        )
        .await;
    assert_eq!(status, 303, "{location}");
    assert_eq!(
        param(&location, "error").as_deref(),
        Some("invalid_request"),
        "{location}"
    );
    let (_, location) = provider
        .authorize(
            &pairs(&authorize(Some((&verifier, "plain")), &redirect_uri, "s")),
            "eve@example.org",
        )
        .await;
    assert!(
        param(&location, "error").is_some(),
        "plain PKCE refused: {location}"
    );
    // A redirect off loopback is never followed: the provider answers the browser itself.
    let (status, page) = provider
        .authorize(
            &pairs(&authorize(
                Some((&challenge, "S256")),
                "http://mail.example.com/callback",
                "s",
            )),
            "eve@example.org",
        )
        .await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("invalid_redirect_uri"), "{page}");

    // The client revokes its refresh token (RFC 7009): the grant's tokens end with it.
    assert_eq!(provider.revoke(&refresh).await, 200);
    assert_eq!(provider.introspect(&access).await["active"], false);
    assert!(provider.refresh(&refresh).await.is_err());
    // eve@example.org is a fixed account other tests may use too: at least this revocation.
    let stats = provider.stats("eve@example.org").await;
    assert!(stats["revocation"].as_u64() >= Some(1), "{stats}");

    // The device flow's refusals: the operator declines; an account the provider does not
    // know; a device code used twice.
    let device = provider.device_authorization(ALL_SCOPES).await;
    assert!(
        device.verification_uri.starts_with(&provider.issuer),
        "{device:?}"
    );
    assert_eq!(provider.deny(&device.user_code).await["approved"], false);
    let (status, answer) = provider.poll(&device.device_code).await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("access_denied")),
        "{answer}"
    );
    let device = provider.device_authorization(ALL_SCOPES).await;
    let refused = provider
        .approve(&device.user_code, "someone@unknown.example.net")
        .await;
    assert_eq!(refused["approved"], false, "{refused}");
    let account = fresh_account("device-twice");
    let device = provider.device_authorization(ALL_SCOPES).await;
    assert_eq!(
        provider.approve(&device.user_code, &account).await["approved"],
        true
    );
    assert_eq!(provider.poll(&device.device_code).await.0, 200);
    let (status, answer) = provider.poll(&device.device_code).await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("invalid_grant")),
        "{answer}"
    );
    assert_eq!(
        provider
            .token_calls(&account, crate::oauth_provider::DEVICE_GRANT, "ok")
            .await,
        1
    );

    // An account whose address the provider has not verified says so in the ID token.
    let unverified = provider
        .sign_in("unverified@example.org", "openid email profile")
        .await;
    assert_eq!(unverified.id_claims()["email_verified"], false);
    assert!(
        unverified.refresh_token.is_none(),
        "no offline_access, no refresh token"
    );
    took(TEST, started);
}
