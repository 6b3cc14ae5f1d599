//! Several instances of mailgate (issue 30): what instances must agree on, black box. Two
//! `serve --http` instances reading one cursor key ring file (`MAILGATE_CURSOR_KEYS_FILE`)
//! continue each other's cursors, with requests alternating between them; an instance without
//! the file refuses them as expired; a stdio server restarted with the file continues a cursor
//! from before its restart.

use serde_json::{Value, json};

use crate::http::rmcp_client;
use crate::util::{Client, FINANCE, HttpServer, World, config_over_shared_demo, message_ids};

/// Two keys: the second is the one an earlier rotation left in the file.
const KEY_RING: &str = "# issuing key first\n\
    bWFpbGdhdGUgdGVzdCBjdXJzb3Iga2V5IG51bWJlciB0d28gKGZpY3Rpb25hbCk\n\
    bWFpbGdhdGUgdGVzdCBjdXJzb3Iga2V5IG51bWJlciBvbmUgKGZpY3Rpb25hbCk\n";

async fn over_http(server: &HttpServer) -> Client {
    let token = server.token.clone().expect("bearer");
    Client::over(
        rmcp_client(server, &token).await.expect("connects"),
        server.pid(),
    )
}

/// `list_messages` of finance in pages of 2, each page asked of the next client in turn.
async fn pages_in_turn(clients: &[&Client]) -> (Vec<String>, usize) {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    let mut answers = 0;
    loop {
        let mut args = json!({ "mailbox": "finance", "criteria": { "maxResults": 2 } });
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let answer = clients[answers % clients.len()]
            .ok("list_messages", args)
            .await;
        answers += 1;
        assert!(answers < 200, "cursors never end");
        ids.extend(message_ids(&answer));
        match answer["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (ids, answers),
        }
    }
}

/// The error text of a call that must fail in-band.
async fn refusal(client: &Client, name: &str, args: Value) -> String {
    let result = client.call(name, args).await.expect("answers");
    assert_eq!(result.is_error, Some(true), "{name} should fail");
    crate::util::text_of(&result)
}

#[tokio::test]
async fn cursors_continue_on_every_instance_that_reads_the_key_ring() {
    let world = World::new();
    let keys = world.dir.path().join("cursor-keys");
    crate::util::write_mode(&keys, KEY_RING.as_bytes(), 0o600);
    let keys = keys.display().to_string();
    let config = config_over_shared_demo(&world, &[FINANCE], r#", "maxResultsPerMailbox": 100"#);
    let args = ["serve", "--http", "127.0.0.1:0", "--config", &config];
    let shared = [("MAILGATE_CURSOR_KEYS_FILE", keys.as_str())];
    let (one, two, alone) = tokio::join!(
        HttpServer::start(&world, &args, &shared),
        HttpServer::start(&world, &args, &shared),
        HttpServer::start(&world, &args, &[]),
    );
    let (one, two, alone) = tokio::join!(over_http(&one), over_http(&two), over_http(&alone));

    let at_once = one
        .ok(
            "list_messages",
            json!({ "mailbox": "finance", "criteria": { "maxResults": 100 } }),
        )
        .await;
    let all = message_ids(&at_once);
    let (paged, answers) = pages_in_turn(&[&one, &two]).await;
    assert!(
        answers > 2,
        "several pages, so both instances redeemed cursors"
    );
    assert_eq!(paged, all, "every cursor continued on the other instance");

    // An instance with keys of its own cannot check them: expired, with what to do.
    let first = one
        .ok(
            "list_messages",
            json!({ "mailbox": "finance", "criteria": { "maxResults": 2 } }),
        )
        .await;
    let cursor = first["nextCursor"].as_str().expect("more pages").to_owned();
    let args = json!({ "mailbox": "finance", "criteria": { "maxResults": 2 }, "cursor": cursor });
    let text = refusal(&alone, "list_messages", args.clone()).await;
    assert!(text.contains("expired"), "{text}");
    assert!(text.contains("without cursor"), "{text}");

    // A stdio server started after the cursor was issued continues it.
    let extra = [("MAILGATE_CURSOR_KEYS_FILE", keys.clone())];
    let restarted = crate::util::spawn_with(&world, &["serve", "--config", &config], &extra).await;
    let next = restarted.ok("list_messages", args).await;
    assert_eq!(message_ids(&next), all[2..4].to_vec());
    restarted.close().await;
}

#[tokio::test]
async fn a_bad_key_ring_file_stops_startup_naming_the_variable_and_line() {
    let world = World::new();
    let config = config_over_shared_demo(&world, &[FINANCE], "");
    let keys = world.dir.path().join("cursor-keys");
    for (content, mode, expect) in [
        ("c2hvcnQ\n", 0o600, "line 1: a secret of 5 bytes"),
        (KEY_RING, 0o644, "chmod 600"),
        ("# only a comment\n", 0o600, "holds no key"),
    ] {
        let _ = std::fs::remove_file(&keys);
        crate::util::write_mode(&keys, content.as_bytes(), mode);
        let out = world
            .run_with(
                &[("MAILGATE_CURSOR_KEYS_FILE", keys.to_str().unwrap())],
                &["serve", "--config", &config],
            )
            .await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{content:?} must stop startup");
        assert!(stderr.contains("MAILGATE_CURSOR_KEYS_FILE"), "{stderr}");
        assert!(stderr.contains(expect), "{expect}: {stderr}");
        assert!(!stderr.contains("bWFpbGdh"), "never a secret: {stderr}");
    }
    // A relative path is refused before the file is looked at.
    let out = world
        .run_with(
            &[("MAILGATE_CURSOR_KEYS_FILE", "cursor-keys")],
            &["serve", "--config", &config],
        )
        .await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("MAILGATE_CURSOR_KEYS_FILE"));
}

/// A TCP relay to the test database that the test can cut: the database "going away" for
/// the mailgate processes that reach it through the relay.
struct Relay {
    port: u16,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Relay {
    async fn to(target_port: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            loop {
                let mut cut = stopped.clone();
                tokio::select! {
                    _ = cut.changed() => return,
                    accepted = listener.accept() => {
                        let Ok((mut inbound, _)) = accepted else { return };
                        let mut cut = stopped.clone();
                        tokio::spawn(async move {
                            let Ok(mut outbound) =
                                tokio::net::TcpStream::connect(("127.0.0.1", target_port)).await
                            else {
                                return;
                            };
                            tokio::select! {
                                _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                                _ = cut.changed() => {}
                            }
                        });
                    }
                }
            }
        });
        Self { port, stop }
    }

    fn cut(&self) {
        let _ = self.stop.send(true);
    }
}

/// `search_mailbox` of finance from its index.
fn from_index(query: &str) -> Value {
    json!({ "mailbox": "finance", "criteria": { "query": query, "source": "index" } })
}

/// Two `serve --http` instances on one database (no key file): each continues the other's
/// cursors (the key ring is the database's), both serve an index synced after they started,
/// without a restart, and when the database goes away an index answer is `SEARCH_FAILED`,
/// never `NOT_FOUND`.
#[tokio::test]
async fn instances_on_one_database_share_cursors_and_the_index_and_never_claim_absence_without_it()
{
    let Some(store) = crate::stores::Store::shared("instances::one_database").await else {
        return;
    };
    let crate::stores::Store::Shared(db) = &store else {
        unreachable!("a shared store");
    };
    let pg: tokio_postgres::Config = db.url.parse().unwrap();
    let relay = Relay::to(pg.get_ports()[0]).await;
    // Every process reaches the database through the relay.
    let env: Vec<(String, String)> = db
        .env
        .iter()
        .map(|(k, v)| match k.as_str() {
            "MAILGATE_INDEX_URL" => {
                let name = v.rsplit('/').next().unwrap();
                (
                    k.clone(),
                    format!("postgres://mailgate@127.0.0.1:{}/{name}", relay.port),
                )
            }
            _ => (k.clone(), v.clone()),
        })
        .collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let world = World::new();
    let config = config_over_shared_demo(&world, &[FINANCE], r#", "maxResultsPerMailbox": 100"#);
    let migrated = world
        .run_with(&env, &["--config", &config, "index", "migrate"])
        .await;
    assert!(migrated.status.success(), "{migrated:?}");
    let args = ["serve", "--http", "127.0.0.1:0", "--config", &config];
    let (one, two) = tokio::join!(
        HttpServer::start(&world, &args, &env),
        HttpServer::start(&world, &args, &env),
    );
    let (one, two) = tokio::join!(over_http(&one), over_http(&two));
    let all = message_ids(
        &one.ok(
            "list_messages",
            json!({ "mailbox": "finance", "criteria": { "maxResults": 100 } }),
        )
        .await,
    );
    let (paged, answers) = pages_in_turn(&[&one, &two]).await;
    assert!(
        answers > 2,
        "several pages, so both instances redeemed cursors"
    );
    assert_eq!(paged, all, "every cursor continued on the other instance");

    // Not synced yet: the index says so. Synced now, by a third process: served at once.
    let never = refusal(&two, "search_mailbox", from_index("invoice")).await;
    assert!(never.contains("mailgate index sync finance"), "{never}");
    let synced = world
        .run_with(&env, &["--config", &config, "index", "sync", "finance"])
        .await;
    assert!(
        String::from_utf8_lossy(&synced.stdout).contains("finance: complete"),
        "{synced:?}"
    );
    let found = two.ok("search_mailbox", from_index("invoice")).await;
    assert_eq!(found["status"], "FOUND", "{found}");
    let absent = one.ok("search_mailbox", from_index("xylophonequark")).await;
    assert_eq!(absent["status"], "NOT_FOUND", "{absent}");

    // The database goes away: no index answer may claim absence.
    relay.cut();
    for client in [&one, &two] {
        for query in ["xylophonequark", "invoice"] {
            let answer = client.ok("search_mailbox", from_index(query)).await;
            assert_eq!(answer["status"], "SEARCH_FAILED", "{query}: {answer}");
            assert!(
                answer["warnings"]
                    .as_array()
                    .is_some_and(|w| w.iter().any(|c| c == "index_failed")),
                "{answer}"
            );
        }
    }
}
