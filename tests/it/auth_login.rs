//! `mailgate auth login|status|logout` and the delegated IMAP backend with real parts (issue 37,
//! items 1, 3 and 5): the loopback `oidc-provider` of `oauth_provider` signs the operator in
//! (device flow, approved through its test route as a fictional account), Dovecot introspects
//! every XOAUTH2 login at that provider, and mailgate keeps and refreshes the grant itself.
//!
//! The official Python and TypeScript SDKs read the signed-in alias and see the revoked grant's
//! SEARCH_FAILED and AUTH_REQUIRED (`tests/clients/*delegated-client*`). Instances on one shared
//! database share one sign-in, and a kill -9 mid-refresh leaves a grant the next instance uses.
//!
//! Each test signs in as IMAP users of its own (`t-…@example.org`), so the tests share one
//! provider and one mail server.

use std::process::Stdio;
use std::time::Instant;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::imap_server::{ImapEntry, ImapUser, MailServer, Stored};
use crate::oauth_delegated::{DELIVERY, both_or_skip, seed, took};
use crate::oauth_provider::{CLIENT_ID, OAuthProvider};
use crate::util::{EXE, World, write_mode};

/// `plugin.json` with `owner`'s mailbox as `team`, signed in through `backend.auth` (provider
/// `oidc`, the loopback issuer) instead of a password; `delegated_from` names the account that
/// may hold the grant of a mailbox shared with it.
fn auth_config(
    server: &MailServer,
    provider: &OAuthProvider,
    world: World,
    owner: &ImapUser,
    delegated_from: Option<&str>,
) -> World {
    let ca = world.path().join("ca.pem");
    write_mode(&ca, &std::fs::read(&server.ca).unwrap(), 0o600);
    let mut mailbox = ImapEntry::new(server, "team", owner).ca(Some(ca)).json();
    for block in ["imap", "smtp"] {
        mailbox["backend"][block]
            .as_object_mut()
            .unwrap()
            .remove("passwordEnv");
    }
    let mut auth = json!({
        "kind": "oauth",
        "provider": "oidc",
        "clientId": CLIENT_ID,
        "issuer": provider.issuer,
        "scopes": ["openid", "email", "offline_access", "mail.read"],
    });
    if let Some(from) = delegated_from {
        auth["delegatedFrom"] = from.into();
    }
    mailbox["backend"]["auth"] = auth;
    // Every line mailgate can log, and the journal, for `assert_no_token_logged`.
    world
        .with("MAILGATE_LOG", "trace")
        .with("MAILGATE_JOURNAL", "true")
        .config(&json!({ "mailboxes": [mailbox] }).to_string(), 0o600)
}

/// Appends what a command printed (its stdout and stderr: answers, errors, trace logs) to the
/// world's `printed.log`, which `assert_no_token_logged` reads.
fn keep_printed(world: &World, out: &[u8], err: &[u8]) {
    use std::io::Write as _;
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(world.path().join("printed.log"))
        .unwrap();
    log.write_all(out).unwrap();
    log.write_all(err).unwrap();
}

/// No token or code the provider issued to `account` is in anything mailgate printed (at trace
/// level) or journaled in `world`, nor in its grant files in the clear.
async fn assert_no_token_logged(world: &World, provider: &OAuthProvider, account: &str) {
    let tokens = provider.issued_tokens(account).await;
    assert!(tokens.len() >= 2, "the provider issued tokens: {tokens:?}");
    let printed = std::fs::read(world.path().join("printed.log")).unwrap_or_default();
    let journal = std::fs::read(world.state().join("journal.jsonl")).unwrap_or_default();
    assert!(
        !printed.is_empty() && !journal.is_empty(),
        "logs and a journal to look at"
    );
    let mut places = vec![("printed", printed), ("journal", journal)];
    for name in grant_files(world) {
        let bytes = std::fs::read(world.state().join("grants").join(&name)).unwrap();
        places.push(("a grant file", bytes));
    }
    for (place, bytes) in &places {
        let text = String::from_utf8_lossy(bytes);
        for token in &tokens {
            assert!(!text.contains(token.as_str()), "a token in {place}");
        }
    }
}

/// Runs `mailgate auth login team`, approving the printed user code at the provider as
/// `account`; returns the exit code and everything it printed.
async fn login_as(world: &World, provider: &OAuthProvider, account: &str) -> (i32, String) {
    let mut child = tokio::process::Command::new(EXE)
        .args(["auth", "login", "team"])
        .env_clear()
        .envs(&world.env)
        .current_dir(world.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed = String::new();
    let mut approved = false;
    while let Some(line) = lines.next_line().await.unwrap() {
        printed.push_str(&line);
        printed.push('\n');
        if let Some(code) = line.split("enter the code: ").nth(1)
            && !approved
        {
            let answer = provider.approve(code.trim(), account).await;
            assert_eq!(answer["approved"], true, "{answer}");
            approved = true;
        }
    }
    let out = child.wait_with_output().await.unwrap();
    printed.push_str(&String::from_utf8_lossy(&out.stderr));
    keep_printed(world, printed.as_bytes(), b"");
    (out.status.code().unwrap_or(-1), printed)
}

/// The official SDKs' view of the delegated alias `team` (PHASE, see the scripts), each against
/// `mailgate serve` in `world`'s environment: the Python client (`python_sdk_delegated_client.py`;
/// skipped, loudly, without the SDK) and the TypeScript one (`sdk-delegated-client.mjs`).
async fn sdks_see(world: &World, phase: &str, subject: &str) {
    let clients = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients");
    let mut runs = vec![(
        std::path::PathBuf::from("node"),
        clients.join("sdk-delegated-client.mjs"),
    )];
    if let Some(python) = crate::real_clients::python_with_mcp("auth_login sdks_see").await {
        runs.push((python, clients.join("python_sdk_delegated_client.py")));
    }
    for (program, script) in runs {
        let out = tokio::process::Command::new(program)
            .arg(&script)
            .args([EXE, "team", phase, subject])
            .env_clear()
            .envs(&world.env)
            .env("PATH", crate::real_clients::path())
            .current_dir(world.path())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("all checks passed"),
            "{} {phase}: {stdout}{}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn grant_files(world: &World) -> Vec<String> {
    crate::util::sorted_names(&world.state().join("grants"))
        .into_iter()
        .filter(|n| n.ends_with(".grant"))
        .collect()
}

async fn call(world: &World, tool: &str, args: Value) -> (i32, Value) {
    let out = world.run(&["call", tool, &args.to_string()]).await;
    keep_printed(world, &out.stdout, &out.stderr);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let value = serde_json::from_str(&text).unwrap_or_else(|_| {
        panic!(
            "{tool}: not JSON: {text} / {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), value)
}

/// The whole life of a grant: login as the mailbox's own account, the mailbox read through
/// XOAUTH2 with the token mailgate keeps, `auth status` naming the account and scopes (never a
/// token), the account revoking the app at the provider (a listing SEARCH_FAILED with
/// backend_sign_in_required, a tool AUTH_REQUIRED naming the command), and logout.
#[tokio::test]
async fn login_reads_the_mailbox_until_the_grant_is_revoked() {
    const TEST: &str = "login_reads_the_mailbox_until_the_grant_is_revoked";
    let (server, provider) = both_or_skip!(TEST);
    let started = Instant::now();
    let owner = ImapUser::fresh(server, "auth-login");
    let to = ImapUser::fresh(server, "auth-login-to");
    seed(&owner, "signed in hello").await;
    let world = World::new()
        .with("PLUGIN_ALLOW_SEND", "true")
        .with("OUTLOOK_SEND_FROM", &owner.address)
        .with("OUTLOOK_ALLOWED_SENDERS", &owner.address)
        .with("OUTLOOK_ALLOWED_RECIPIENT_DOMAINS", &server.domain);
    let world = auth_config(server, provider, world, &owner, None);

    // Before any sign-in: the answer says who must act, never an empty mailbox.
    let (_, before) = call(
        &world,
        "list_messages",
        json!({"mailbox": "team", "criteria": {}}),
    )
    .await;
    assert_eq!(before["status"], "SEARCH_FAILED", "{before}");

    let (code, printed) = login_as(&world, provider, &owner.address).await;
    assert_eq!(code, 0, "{printed}");
    assert!(printed.contains("signed in as"), "{printed}");
    assert_eq!(grant_files(&world), ["team.grant"]);

    let (code, listing) = call(
        &world,
        "list_messages",
        json!({"mailbox": "team", "criteria": {}}),
    )
    .await;
    assert_eq!(code, 0, "{listing}");
    assert!(listing.to_string().contains("signed in hello"), "{listing}");
    sdks_see(&world, "signed-in", "signed in hello").await;

    // SMTP submission with the same grant: XOAUTH2 through Postfix and Dovecot's oauth2 passdb.
    let tag = format!("sent with the kept grant {}", std::process::id());
    let (code, sent) = call(
        &world,
        "send_email",
        json!({"to": [to.address], "subject": tag, "body": "Through the grant."}),
    )
    .await;
    assert_eq!(code, 0, "{sent}");
    assert_eq!(sent["status"], "sent", "{sent}");
    let got = to
        .wait_for("INBOX", DELIVERY, |m: &Stored| m.subject() == tag)
        .await;
    assert_eq!(
        got.header_value("From").as_deref(),
        Some(owner.address.as_str())
    );

    let status = world.run(&["auth", "status"]).await;
    let text = String::from_utf8_lossy(&status.stdout).into_owned();
    assert_eq!(status.status.code(), Some(0), "{text}");
    assert!(
        text.contains("signed in") && text.contains(&owner.address),
        "{text}"
    );
    assert!(text.contains("mail.read"), "{text}");

    assert!(provider.revoke_all(&owner.address).await >= 1);
    let (_, failed) = call(
        &world,
        "list_messages",
        json!({"mailbox": "team", "criteria": {}}),
    )
    .await;
    assert_eq!(failed["status"], "SEARCH_FAILED", "{failed}");
    assert!(
        failed.to_string().contains("backend_sign_in_required"),
        "{failed}"
    );
    let (code, error) = call(
        &world,
        "get_folder_stats",
        json!({"mailbox": "team", "folderId": "inbox"}),
    )
    .await;
    assert_eq!(code, 1, "{error}");
    let error_text = error.to_string();
    assert!(error_text.contains("AUTH_REQUIRED"), "{error_text}");
    assert!(
        error_text.contains("mailgate auth login team"),
        "{error_text}"
    );
    let status = world.run(&["auth", "status", "team"]).await;
    let text = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(text.contains("REFUSED"), "{text}");
    sdks_see(&world, "revoked", "signed in hello").await;

    let out = world.run(&["auth", "logout", "team"]).await;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("signed out"), "{text}");
    assert!(grant_files(&world).is_empty());
    assert_no_token_logged(&world, provider, &owner.address).await;
    took(TEST, started);
}

/// An ID token for another account than the alias's (or its delegatedFrom) is refused: no grant
/// file, the alias named, the rule said, no address of either account in what is printed.
/// The same account is accepted for a mailbox whose delegatedFrom names it.
#[tokio::test]
async fn login_as_the_wrong_account_is_refused() {
    const TEST: &str = "login_as_the_wrong_account_is_refused";
    let (server, provider) = both_or_skip!(TEST);
    let started = Instant::now();
    let owner = ImapUser::fresh(server, "auth-wrong");
    let other = ImapUser::fresh(server, "auth-wrong-other");
    let world = auth_config(server, provider, World::new(), &owner, None);
    let (code, printed) = login_as(&world, provider, &other.address).await;
    assert_eq!(code, 1, "{printed}");
    assert!(printed.contains("team: sign-in refused"), "{printed}");
    assert!(printed.contains("delegatedFrom"), "{printed}");
    assert!(!printed.contains(&other.address), "{printed}");
    assert!(grant_files(&world).is_empty(), "nothing kept");

    let shared = auth_config(server, provider, World::new(), &owner, Some(&other.address));
    let (code, printed) = login_as(&shared, provider, &other.address).await;
    assert_eq!(code, 0, "{printed}");
    assert!(printed.contains("delegatedFrom account"), "{printed}");
    took(TEST, started);
}

/// A short-lived access token is refreshed by mailgate, once for two instances that need it at
/// the same moment (the grant file's lock and its cached token), and the rotated refresh token
/// is the one kept: the provider never sees the old one again (it would revoke the grant).
#[tokio::test]
async fn two_instances_refresh_once_and_keep_the_rotated_token() {
    const TEST: &str = "two_instances_refresh_once_and_keep_the_rotated_token";
    let (server, provider) = both_or_skip!(TEST);
    let started = Instant::now();
    let owner = ImapUser::fresh(server, "auth-refresh");
    seed(&owner, "refreshed hello").await;
    let world = auth_config(server, provider, World::new(), &owner, None);
    // Lifetime 2 s: refreshed from halfway through (the short-lifetime rule).
    provider.set_access_ttl(&owner.address, 2).await;
    let (code, printed) = login_as(&world, provider, &owner.address).await;
    assert_eq!(code, 0, "{printed}");
    // The refreshed token lives the default hour: an instance that reaches the grant after the
    // other refreshed (a loaded machine starts one process late) uses it, whenever it comes.
    provider.set_access_ttl(&owner.address, 0).await;
    // The provider's own clock must pass the token's lifetime: nothing to poll for.
    tokio::time::sleep(std::time::Duration::from_millis(2_100)).await;
    let args = json!({"mailbox": "team", "criteria": {}});
    let (a, b) = tokio::join!(
        call(&world, "list_messages", args.clone()),
        call(&world, "list_messages", args.clone())
    );
    for (code, listing) in [a, b] {
        assert_eq!(code, 0, "{listing}");
        assert!(listing.to_string().contains("refreshed hello"), "{listing}");
    }
    assert_eq!(
        provider
            .token_calls(&owner.address, "refresh_token", "ok")
            .await,
        1,
        "{}",
        provider.stats(&owner.address).await
    );
    assert_eq!(
        provider
            .token_calls(&owner.address, "refresh_token", "error")
            .await,
        0,
        "the rotated-away token was never replayed"
    );
    assert_no_token_logged(&world, provider, &owner.address).await;
    took(TEST, started);
}

/// Polls `done` until it holds, failing after `within` (the provider and the processes answer in
/// their own time: nothing to sleep for).
async fn eventually<F, Fut>(what: &str, within: std::time::Duration, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !done().await {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// `mailgate call TOOL ARGS` as a child the test may kill.
fn spawn_call(world: &World, tool: &str, args: &Value) -> tokio::process::Child {
    tokio::process::Command::new(EXE)
        .args(["call", tool, &args.to_string()])
        .env_clear()
        .envs(&world.env)
        .current_dir(world.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// kill -9 mid-rotation, at the two points a client controls. An instance killed while its
/// refresh is on the wire (held at the provider, which never sees it) leaves the grant file as it
/// was, and its refresh token still valid: the next instance refreshes with it. An instance
/// killed as soon as its rotated grant is in place (the file replaced) leaves the rotated token:
/// the next instance uses it, and the provider never sees a rotated-away token again (which it
/// would answer by revoking the grant). (Between the provider's rotation and the rename no client
/// can keep the new token; what mailgate keeps then is the old file, whole.)
#[tokio::test]
async fn a_kill_mid_refresh_leaves_a_grant_the_next_instance_uses() {
    const TEST: &str = "a_kill_mid_refresh_leaves_a_grant_the_next_instance_uses";
    let (server, provider) = both_or_skip!(TEST);
    let started = Instant::now();
    let owner = ImapUser::fresh(server, "auth-kill");
    seed(&owner, "survived hello").await;
    let world = auth_config(server, provider, World::new(), &owner, None);
    provider.set_access_ttl(&owner.address, 2).await;
    let (code, printed) = login_as(&world, provider, &owner.address).await;
    assert_eq!(code, 0, "{printed}");
    let grant = world.state().join("grants").join("team.grant");
    let signed_in = std::fs::read(&grant).unwrap();
    let args = json!({"mailbox": "team", "criteria": {}});
    let listing_works = || async {
        let (code, listing) = call(&world, "list_messages", args.clone()).await;
        assert_eq!(code, 0, "{listing}");
        assert!(listing.to_string().contains("survived hello"), "{listing}");
    };
    let refreshes = |outcome: &'static str| {
        let address = owner.address.clone();
        async move {
            provider
                .token_calls(&address, "refresh_token", outcome)
                .await
        }
    };
    // The provider's own clock must pass the token's lifetime: nothing to poll for.
    tokio::time::sleep(std::time::Duration::from_millis(2_100)).await;

    // 1. Killed while the refresh is held at the provider.
    provider.hold_refreshes(&owner.address, true).await;
    let mut child = spawn_call(&world, "list_messages", &args);
    eventually("the refresh is held", DELIVERY, || async {
        provider.held_refreshes(&owner.address).await.0 == 1
    })
    .await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    eventually("the provider saw the client go", DELIVERY, || async {
        provider.held_refreshes(&owner.address).await == (0, 1)
    })
    .await;
    provider.hold_refreshes(&owner.address, false).await;
    assert_eq!(
        std::fs::read(&grant).unwrap(),
        signed_in,
        "the file as it was"
    );
    listing_works().await;
    assert_eq!(refreshes("ok").await, 1, "refreshed with the kept token");

    // 2. Killed as soon as the next rotation is in place.
    let rotated_once = std::fs::read(&grant).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(2_100)).await;
    let mut child = spawn_call(&world, "list_messages", &args);
    eventually("the rotated grant is in place", DELIVERY, || async {
        std::fs::read(&grant).is_ok_and(|now| now != rotated_once)
    })
    .await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    assert_eq!(refreshes("ok").await, 2);
    tokio::time::sleep(std::time::Duration::from_millis(2_100)).await;
    listing_works().await;
    assert_eq!(refreshes("ok").await, 3, "refreshed with the rotated token");
    assert_eq!(
        refreshes("error").await,
        0,
        "no rotated-away token was replayed: {}",
        provider.stats(&owner.address).await
    );
    assert_no_token_logged(&world, provider, &owner.address).await;
    took(TEST, started);
}

/// Instances that share a database instead of a state folder (issue 37, item 3): the grant is a
/// sealed row of that database, under its row-level security, so one sign-in serves an instance
/// with another state folder; the row needs `MAILGATE_GRANT_KEY_FILE`'s key (startup refuses
/// without one), and logout removes it.
#[tokio::test]
async fn instances_on_one_database_share_one_sign_in() {
    const TEST: &str = "instances_on_one_database_share_one_sign_in";
    let (server, provider) = both_or_skip!(TEST);
    let Some(pg) = crate::stores::server(TEST).await else {
        return;
    };
    let started = Instant::now();
    let db = crate::stores::fresh_database(pg, TEST).await;
    let owner = ImapUser::fresh(server, "auth-shared");
    seed(&owner, "shared sign-in hello").await;
    let key_dir = tempfile::tempdir().unwrap();
    let key = key_dir.path().join("grant.key");
    write_mode(&key, &[7u8; 32], 0o600);
    let instance = |with_key: bool| {
        let mut world = World::new();
        for (name, value) in &db.env {
            world = world.with(name, value);
        }
        if with_key {
            world = world.with("MAILGATE_GRANT_KEY_FILE", &key.display().to_string());
        }
        auth_config(server, provider, world, &owner, None)
    };
    let (a, b) = (instance(true), instance(true));
    let out = a.run(&["index", "migrate"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let keyless = instance(false);
    let out = keyless.run(&["auth", "status"]).await;
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("MAILGATE_GRANT_KEY_FILE"), "{err}");

    let (code, printed) = login_as(&a, provider, &owner.address).await;
    assert_eq!(code, 0, "{printed}");
    assert!(
        printed.contains("grant saved in the shared database"),
        "{printed}"
    );
    assert!(
        grant_files(&a).is_empty(),
        "no grant file: the row is the grant"
    );
    let admin = crate::stores::connect(&db.admin_url).await;
    let rows = admin
        .query("SELECT sealed FROM mailgate_grants", &[])
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    let sealed: Vec<u8> = rows[0].get(0);
    assert!(
        sealed.starts_with(b"mailgate-grant v1 "),
        "sealed as a file is"
    );

    // Another instance, its own state folder, no sign-in of its own.
    let args = json!({"mailbox": "team", "criteria": {}});
    let (code, listing) = call(&b, "list_messages", args).await;
    assert_eq!(code, 0, "{listing}");
    assert!(
        listing.to_string().contains("shared sign-in hello"),
        "{listing}"
    );
    let status = b.run(&["auth", "status", "team"]).await;
    let text = String::from_utf8_lossy(&status.stdout).into_owned();
    assert_eq!(status.status.code(), Some(0), "{text}");
    assert!(
        text.contains("signed in") && text.contains(&owner.address),
        "{text}"
    );

    let out = b.run(&["auth", "logout", "team"]).await;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("signed out"), "{text}");
    let left: i64 = admin
        .query_one("SELECT count(*) FROM mailgate_grants", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "logout removed the row");
    took(TEST, started);
}
