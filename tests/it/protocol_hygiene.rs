//! Malformed protocol input over stdio with the real binary: no argument value reaches stderr at
//! any log level, and an oversized JSON-RPC line is answered instead of dropped.

use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::util::{EXE, World, text_of};

const CANARY_STR: &str = "CANARY-str-5e1f";
const CANARY_ENUM: &str = "CANARY-enum-77ab";
const CANARY_KEY: &str = "CANARY-key-0c4d";
const CANARY_NESTED_KEY: &str = "CANARY-nkey-91fe";
const CANARY_TOOL: &str = "CANARY-tool-3b2a";
const CANARY_BOUND: &str = "CANARY-bound-d00d";
/// A ZIP password sent as a number, and an array item of the wrong type.
const CANARY_NUM: u64 = 918_273_645;
const CANARY_ITEM: u64 = 564_738_291;

/// Every malformed-argument path: wrong JSON types (boolean, number, string, array item), an
/// unknown enum variant, unknown field names at the top and nested, a bound broken by a
/// canary-bearing value, and an unknown tool name.
fn malformed_calls() -> Vec<(&'static str, Value)> {
    let mut unknown_top = json!({"mailbox": "finance"});
    unknown_top[CANARY_KEY] = json!(1);
    let mut unknown_nested = json!({"mailbox": "finance", "criteria": {}});
    unknown_nested["criteria"][CANARY_NESTED_KEY] = json!("x");
    vec![
        (
            "mark_messages",
            json!({"mailbox": "finance", "messageIds": ["a"], "read": CANARY_STR}),
        ),
        (
            "search_mailbox",
            json!({"mailbox": "finance", "criteria": {"maxResults": CANARY_STR}}),
        ),
        (
            "search_mailbox",
            json!({"mailbox": "finance", "criteria": {"source": CANARY_ENUM}}),
        ),
        (
            "get_message",
            json!({"mailbox": "finance", "messageId": "m", "format": CANARY_ENUM}),
        ),
        (
            "get_attachment_content",
            json!({"mailbox": "finance", "messageId": "m", "attachmentId": "att-0",
                   "password": CANARY_NUM}),
        ),
        (
            "search_mailboxes",
            json!({"mailboxes": ["finance", CANARY_ITEM], "criteria": {}}),
        ),
        (
            "list_messages",
            json!({"mailbox": "finance", "criteria": {"isRead": [CANARY_STR]}}),
        ),
        ("list_folders", unknown_top),
        ("search_mailbox", unknown_nested),
        (
            "list_folders",
            json!({"mailbox": format!("{CANARY_BOUND}-{}", "x".repeat(80))}),
        ),
        (CANARY_TOOL, json!({})),
    ]
}

fn canaries() -> Vec<String> {
    vec![
        CANARY_STR.into(),
        CANARY_ENUM.into(),
        CANARY_KEY.into(),
        CANARY_NESTED_KEY.into(),
        CANARY_TOOL.into(),
        CANARY_BOUND.into(),
        CANARY_NUM.to_string(),
        CANARY_ITEM.to_string(),
        // Any fragment of a canary (a value cut short would still leak).
        "CANARY".into(),
    ]
}

// See: issue 8, finding 6 (argument values reached stderr through rmcp's `response error`).
#[tokio::test]
async fn issue_8_malformed_argument_values_never_reach_stderr_at_any_log_level() {
    // Unset (the default, warn), then the most verbose level an operator can choose.
    for level in [None, Some("trace")] {
        let mut world = World::new()
            .with("PLUGIN_ALLOW_WRITES", "true")
            .with("MAILGATE_JOURNAL", "true");
        if let Some(level) = level {
            world = world.with("MAILGATE_LOG", level);
        }
        let stderr_path = world.path().join("stderr.log");
        let client = world.demo_client_with_stderr(&stderr_path).await;
        let mut answers = Vec::new();
        for (tool, args) in malformed_calls() {
            // Malformed arguments are an INVALID_ARGUMENT result; only the unknown tool name
            // is a protocol error.
            let answer = match client.call(tool, args.clone()).await {
                Ok(result) => {
                    assert_eq!(result.is_error, Some(true), "{tool} {args}: {result:?}");
                    text_of(&result)
                }
                Err(err) => {
                    assert_eq!(tool, CANARY_TOOL, "only a name outside the catalog: {err}");
                    err.to_string()
                }
            };
            answers.push(format!("{tool} {args}: {answer}"));
        }
        // Still serving; and at trace, mailgate's own events are really on.
        client.ok("list_allowed_mailboxes", json!({})).await;
        client.close().await;
        // rmcp logs a response error before sending it, and mailgate logs a call before
        // answering it, so every line is on disk once the last answer arrived.
        let stderr = std::fs::read_to_string(&stderr_path).unwrap();
        if level == Some("trace") {
            assert!(stderr.contains("tool call"), "trace is on: {stderr}");
        }
        for canary in canaries() {
            assert!(
                !stderr.contains(&canary),
                "MAILGATE_LOG={level:?}: stderr leaked {canary}: {stderr}"
            );
        }
        // The answers carry no value either (the root of the leak: rmcp logs what we return).
        for answer in &answers {
            let (_, message) = answer.split_once("}: ").unwrap();
            for canary in canaries() {
                assert!(!message.contains(&canary), "echoes {canary}: {answer}");
            }
        }
        let journal = std::fs::read_to_string(world.state().join("journal.jsonl")).unwrap();
        for canary in canaries() {
            assert!(!journal.contains(&canary), "journal leaked {canary}");
        }
    }
}

/// A raw stdio session with the real binary: lines in, lines out.
struct RawSession {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl RawSession {
    async fn start(world: &World) -> Self {
        Self::start_with(world, Stdio::null(), "t").await
    }

    /// With the server's stderr going to `stderr`, introducing itself as `client_name`.
    async fn start_with(world: &World, stderr: Stdio, client_name: &str) -> Self {
        let mut child = tokio::process::Command::new(EXE)
            .args(["demo", "--serve"])
            .env_clear()
            .envs(&world.env)
            .current_dir(world.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut session = Self {
            child,
            stdin,
            stdout,
        };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": client_name, "version": "1"}}});
        session.send(init.to_string().as_bytes()).await;
        let init = session.reply().await;
        assert_eq!(init["id"], 0, "{init}");
        session
            .send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        session
    }

    async fn send(&mut self, line: &[u8]) {
        self.stdin.write_all(line).await.unwrap();
        self.stdin.write_all(b"\n").await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The next line from the server; a closed stdout or a hang fails the test.
    async fn reply(&mut self) -> Value {
        let line =
            tokio::time::timeout(std::time::Duration::from_secs(30), self.stdout.next_line())
                .await
                .expect("the server answers instead of leaving the client waiting")
                .unwrap()
                .expect("the server is still running");
        serde_json::from_str(&line).unwrap()
    }
}

fn oversized_call(id: Value, bytes: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": "search_mailbox",
                   "arguments": {"mailbox": "finance", "criteria": {"query": "y".repeat(bytes)}}},
    }))
    .unwrap()
}

// See: issue 8, finding 12a (a line over the size bound was dropped with no reply).
#[tokio::test]
async fn issue_8_an_oversized_line_is_answered_and_the_server_keeps_serving() {
    let world = World::new();
    let mut s = RawSession::start(&world).await;
    let over = 16 * 1024 * 1024 + 1;
    // The id is recovered (here it comes first) ...
    s.send(&oversized_call(json!(7), over)).await;
    let reply = s.reply().await;
    assert_eq!(reply["id"], 7, "{reply}");
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    assert_eq!(reply["error"]["data"]["maxLineBytes"], 16 * 1024 * 1024);
    // ... and the next request is served.
    s.send(br#"{"jsonrpc":"2.0","id":8,"method":"tools/list"}"#)
        .await;
    let reply = s.reply().await;
    assert_eq!(reply["id"], 8, "{reply}");
    assert!(reply["result"]["tools"].is_array(), "{reply}");
    // Without a recoverable id the error still comes, with no id.
    let mut anonymous = b"{\"jsonrpc\":\"2.0\",\"id\":{\"x\":1},\"pad\":\"".to_vec();
    anonymous.extend(std::iter::repeat_n(b'z', over));
    anonymous.extend(b"\"}");
    s.send(&anonymous).await;
    let reply = s.reply().await;
    assert!(reply.get("id").is_none_or(Value::is_null), "{reply}");
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    // Well-formed JSON that is no valid request is answered with its id too.
    s.send(br#"{"jsonrpc":"2.0","id":"q-9","method":"tools/call","params":"nonsense"}"#)
        .await;
    let reply = s.reply().await;
    assert_eq!(reply["id"], "q-9", "{reply}");
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    s.send(br#"{"jsonrpc":"2.0","id":10,"method":"ping"}"#)
        .await;
    assert_eq!(s.reply().await["id"], 10);
    drop(s.stdin);
    let status = s.child.wait().await.unwrap();
    assert!(status.success(), "{status}");
}

// See: issue 8, finding 6 (same class): a first message that is no request made the startup
// error print that whole message, values included, to stderr.
#[tokio::test]
async fn issue_8_a_first_message_other_than_initialize_is_not_echoed_to_stderr() {
    let world = World::new().with("MAILGATE_LOG", "trace");
    let mut child = tokio::process::Command::new(EXE)
        .args(["demo", "--serve"])
        .env_clear()
        .envs(&world.env)
        .current_dir(world.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // A response (rmcp answers an early request in-band, but stops at anything else).
    let first = json!({"jsonrpc": "2.0", "id": 1, "result": {"password": CANARY_STR}});
    stdin
        .write_all(format!("{first}\n").as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the handshake failed: {stderr}");
    assert!(
        stderr.contains("initialize"),
        "the failure is named: {stderr}"
    );
    assert!(
        !stderr.contains("CANARY"),
        "stderr leaked the call: {stderr}"
    );
}

// See: issue 8, finding 6: rmcp quotes client text in its own events (`response error id=…`,
// `peer_info` at info, whole requests at debug); at the most verbose level none of it is logged.
#[tokio::test]
async fn issue_8_dependencies_log_no_client_text_at_trace() {
    let world = World::new().with("MAILGATE_LOG", "trace");
    let stderr_path = world.path().join("stderr.log");
    let stderr = std::fs::File::create(&stderr_path).unwrap();
    let mut s = RawSession::start_with(&world, stderr.into(), "CANARY-client-6a1e").await;
    let call = json!({"jsonrpc": "2.0", "id": "CANARY-id-42aa", "method": "tools/call",
        "params": {"name": "list_folders", "arguments": {"mailbox": 5}}});
    s.send(call.to_string().as_bytes()).await;
    let reply = s.reply().await;
    assert_eq!(reply["id"], "CANARY-id-42aa", "{reply}");
    // Invalid arguments are a tool result the model reads (issue 9), not a protocol error.
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    drop(s.stdin);
    assert!(s.child.wait().await.unwrap().success());
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(stderr.contains("INFO mailgate"), "trace is on: {stderr}");
    assert!(
        !stderr.contains("CANARY"),
        "stderr quotes client text: {stderr}"
    );
}
