//! MCP over stdio: newline-delimited JSON-RPC read through a bounded line reader.
//!
//! Purpose: rmcp's own stdio transport drops a line over its 16 MiB bound with nothing but a log
//! line, so the client waits forever for an answer (issue 8, finding 12a). Here a line over
//! [`MAX_LINE_BYTES`] is skipped in constant memory and answered with a JSON-RPC `Invalid
//! Request` error carrying the request's `id` when [`IdScanner`] can recover it, and the next line
//! is served as usual. The same id recovery answers well-formed JSON that is not a valid message
//! (rmcp answers those without an id). Invariants: no more than [`MAX_LINE_BYTES`] of one line is
//! ever buffered; nothing read from stdin is logged; stdout carries only JSON-RPC frames, written
//! through rmcp's own codec. Lines that fit are decoded by rmcp's codec, so its compatibility
//! rules (BOM, ignored non-MCP notifications, unparsable input ignored) hold unchanged.
//! Callers: [`super::serve`] only.

use std::sync::Arc;

use futures::SinkExt;
use rmcp::RoleServer;
use rmcp::model::{ErrorData, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::{JsonRpcMessageCodec, JsonRpcMessageCodecError, TransportWriter};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio::sync::Mutex;
use tokio_util::codec::{Decoder, FramedWrite};

/// The largest JSON-RPC line read, in bytes (rmcp's default, so a message its HTTP and stdio
/// transports accept is accepted here). The largest tool input, a 500,000-character body, fits
/// even when every character is sent as a 12-byte `\u` surrogate pair.
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The longest `id` (as raw JSON) echoed back in an error reply; longer ids are not echoed.
const MAX_ID_BYTES: usize = 256;

/// The server side of stdio, bounded. `R` and `W` are stdin and stdout in production.
pub(crate) struct BoundedStdio<R, W> {
    read: BufReader<R>,
    /// The line being read; never longer than `max_line`.
    line: Vec<u8>,
    max_line: usize,
    /// Set while the rest of an over-long line is skipped; it still looks for the line's id.
    /// Lives here, not in `read_line`, because `receive` is polled in a `select!` and can be
    /// cancelled mid-line.
    skipping: Option<IdScanner>,
    write: Arc<Mutex<Option<TransportWriter<RoleServer, W>>>>,
    /// An error reply owed to the client, written at the start of the next `receive`.
    pending: Option<PendingReply>,
}

struct PendingReply {
    error: ErrorData,
    id: Option<RequestId>,
    /// Already handed to the codec; only the flush is left (a cancelled flush is retried).
    fed: bool,
}

/// Rmcp's stdio handles, bounded.
pub(crate) fn stdio() -> BoundedStdio<tokio::io::Stdin, tokio::io::Stdout> {
    let (read, write) = rmcp::transport::stdio();
    BoundedStdio::new(read, write, MAX_LINE_BYTES)
}

/// What one bounded line read found.
enum LineRead {
    /// A whole `\n`-terminated line is in `line`.
    Line,
    /// A line over the bound ended; its id, if recovered.
    Oversized(Option<RequestId>),
    Eof,
    Io(std::io::Error),
}

/// What to do once the `fill_buf` borrow has ended.
enum Step {
    Line,
    More,
    OversizedEnd,
}

impl<R, W> BoundedStdio<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub(crate) fn new(read: R, write: W, max_line: usize) -> Self {
        Self {
            read: BufReader::new(read),
            line: Vec::new(),
            max_line,
            skipping: None,
            write: Arc::new(Mutex::new(Some(FramedWrite::new(
                write,
                JsonRpcMessageCodec::<TxJsonRpcMessage<RoleServer>>::default(),
            )))),
            pending: None,
        }
    }

    /// Reads one line into `self.line` without letting it grow past `self.max_line`. Cancel-safe:
    /// bytes are copied and consumed with no await in between, and all state is on `self`.
    async fn read_line(&mut self) -> LineRead {
        loop {
            let (consumed, step) = {
                let available = match self.read.fill_buf().await {
                    Ok(available) => available,
                    Err(e) => return LineRead::Io(e),
                };
                if available.is_empty() {
                    return LineRead::Eof;
                }
                let newline = available.iter().position(|b| *b == b'\n');
                let take = newline.map_or(available.len(), |at| at + 1);
                let chunk = &available[..take];
                let ends = newline.is_some();
                if let Some(scanner) = self.skipping.as_mut() {
                    scanner.feed(chunk);
                    (take, if ends { Step::OversizedEnd } else { Step::More })
                } else if self.line.len().saturating_add(take) > self.max_line {
                    let mut scanner = IdScanner::default();
                    scanner.feed(&self.line);
                    scanner.feed(chunk);
                    // Give the memory back: the next line starts small again.
                    self.line = Vec::new();
                    self.skipping = Some(scanner);
                    (take, if ends { Step::OversizedEnd } else { Step::More })
                } else {
                    self.line.extend_from_slice(chunk);
                    (take, if ends { Step::Line } else { Step::More })
                }
            };
            self.read.consume(consumed);
            match step {
                Step::Line => return LineRead::Line,
                Step::More => {}
                Step::OversizedEnd => {
                    let id = self.skipping.take().and_then(IdScanner::finish);
                    return LineRead::Oversized(id);
                }
            }
        }
    }

    /// Writes the owed error reply, if any. `false` when stdout is gone.
    async fn flush_pending(&mut self) -> bool {
        let Some(reply) = self.pending.as_mut() else {
            return true;
        };
        let mut write = self.write.lock().await;
        let Some(framed) = write.as_mut() else {
            return false;
        };
        if !reply.fed {
            let message =
                TxJsonRpcMessage::<RoleServer>::error(reply.error.clone(), reply.id.clone());
            if framed.feed(message).await.is_err() {
                return false;
            }
            reply.fed = true;
        }
        if framed.flush().await.is_err() {
            return false;
        }
        drop(write);
        self.pending = None;
        true
    }
}

impl<R, W> Transport<RoleServer> for BoundedStdio<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let lock = Arc::clone(&self.write);
        async move {
            let mut write = lock.lock().await;
            match write.as_mut() {
                Some(framed) => framed.send(item).await.map_err(Into::into),
                None => Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the transport is closed",
                )),
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if !self.flush_pending().await {
                return None;
            }
            match self.read_line().await {
                LineRead::Line => {}
                LineRead::Oversized(id) => {
                    tracing::warn!(
                        max_line_bytes = self.max_line,
                        id_recovered = id.is_some(),
                        "a JSON-RPC message over the size bound was refused unread"
                    );
                    self.pending = Some(PendingReply {
                        error: ErrorData::invalid_request(
                            format!(
                                "the message is larger than {} bytes and was not read",
                                self.max_line
                            ),
                            Some(serde_json::json!({ "maxLineBytes": self.max_line })),
                        ),
                        id,
                        fed: false,
                    });
                    continue;
                }
                LineRead::Eof => return None,
                LineRead::Io(e) => {
                    tracing::error!(kind = ?e.kind(), "stdin could not be read");
                    return None;
                }
            }
            let mut buf = bytes::BytesMut::from(&self.line[..]);
            let decoded =
                JsonRpcMessageCodec::<RxJsonRpcMessage<RoleServer>>::default().decode(&mut buf);
            match decoded {
                Ok(Some(message)) => {
                    self.line.clear();
                    return Some(message);
                }
                // A non-MCP notification rmcp ignores for compatibility.
                Ok(None) => {}
                Err(JsonRpcMessageCodecError::Serde(e))
                    if matches!(
                        e.classify(),
                        serde_json::error::Category::Data | serde_json::error::Category::Io
                    ) =>
                {
                    // Well-formed JSON that is no JSON-RPC message: answered, as rmcp does, but
                    // with the id when there is one, so the client is not left waiting.
                    let mut scanner = IdScanner::default();
                    scanner.feed(&self.line);
                    self.pending = Some(PendingReply {
                        error: ErrorData::invalid_request("Invalid request", None),
                        id: scanner.finish(),
                        fed: false,
                    });
                }
                // Unparsable input is ignored, as rmcp and the other MCP SDKs do: no id can be
                // trusted, and answering garbage invites an error storm with an echoing peer.
                Err(_) => {}
            }
            self.line.clear();
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut write = self.write.lock().await;
        drop(write.take());
        Ok(())
    }
}

/// Recovers the top-level `"id"` of a JSON-RPC message from its bytes, streamed in chunks, in
/// constant memory (at most [`MAX_ID_BYTES`] kept) and without recursion.
///
/// The id is recovered only when it is unambiguous: the bytes form one JSON object (modulo the
/// content of nested values, which is only tracked for depth and strings), it has exactly one
/// `"id"` key at the top level, spelled without escapes, and its value is a string or number of
/// at most [`MAX_ID_BYTES`] that parses as a JSON-RPC id. Anything else yields no id: MCP omits
/// the id of an error reply when it cannot be read (JSON-RPC 2.0 writes `null`). Echoing the id
/// is safe: it is the client's own correlation token, sent back to that client on stdout and
/// never logged.
#[derive(Default)]
struct IdScanner {
    started: bool,
    broken: bool,
    /// Open objects and arrays; 1 inside the top-level object, 0 before and after it.
    depth: usize,
    in_string: bool,
    escaped: bool,
    expect: Expect,
    /// The first bytes of the current top-level key, and its length (saturating).
    key: [u8; 2],
    key_len: usize,
    key_escaped: bool,
    /// Whether the value being read belongs to the key `id`.
    value_is_id: bool,
    /// The raw id value being captured.
    capture: Vec<u8>,
    capture_overflow: bool,
    found: Found,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Expect {
    #[default]
    Key,
    InKey,
    Colon,
    Value,
    InStringValue,
    InScalar,
    /// After a value: `,` or `}`.
    Comma,
}

#[derive(Default)]
enum Found {
    #[default]
    None,
    One(Vec<u8>),
    /// Duplicate, nested, escaped or too long: not echoed.
    Unusable,
}

impl IdScanner {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.broken {
                return;
            }
            self.step(b);
        }
    }

    fn step(&mut self, b: u8) {
        if !self.started {
            // Leading whitespace and a UTF-8 byte order mark are skipped.
            match b {
                b' ' | b'\t' | b'\r' | b'\n' | 0xEF | 0xBB | 0xBF => {}
                b'{' => {
                    self.started = true;
                    self.depth = 1;
                    self.expect = Expect::Key;
                }
                _ => self.broken = true,
            }
            return;
        }
        if self.depth == 0 {
            // After the object: only whitespace may follow.
            if !b.is_ascii_whitespace() {
                self.broken = true;
            }
            return;
        }
        if self.in_string {
            self.string_byte(b);
            return;
        }
        if self.depth > 1 {
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 1 {
                        self.expect = Expect::Comma;
                    }
                }
                _ => {}
            }
            return;
        }
        self.top_level_byte(b);
    }

    fn string_byte(&mut self, b: u8) {
        let top = self.depth == 1;
        if self.escaped {
            self.escaped = false;
        } else if b == b'\\' {
            self.escaped = true;
            if top && self.expect == Expect::InKey {
                self.key_escaped = true;
            }
        } else if b == b'"' {
            self.in_string = false;
            if top {
                match self.expect {
                    Expect::InKey => self.expect = Expect::Colon,
                    Expect::InStringValue => {
                        self.capture_byte(b);
                        self.end_value();
                    }
                    _ => self.broken = true,
                }
            }
            return;
        }
        if top {
            match self.expect {
                Expect::InKey => {
                    if let Some(slot) = self.key.get_mut(self.key_len) {
                        *slot = b;
                    }
                    self.key_len = self.key_len.saturating_add(1);
                }
                Expect::InStringValue => self.capture_byte(b),
                _ => {}
            }
        }
    }

    fn top_level_byte(&mut self, b: u8) {
        if self.expect == Expect::InScalar {
            if matches!(b, b',' | b'}') || b.is_ascii_whitespace() {
                self.end_value();
            } else {
                self.capture_byte(b);
                return;
            }
        }
        match (b, self.expect) {
            (b' ' | b'\t' | b'\r' | b'\n', _) => {}
            (b'"', Expect::Key) => {
                self.in_string = true;
                self.expect = Expect::InKey;
                self.key_len = 0;
                self.key_escaped = false;
            }
            (b':', Expect::Colon) => {
                self.value_is_id = !self.key_escaped && self.key_len == 2 && self.key == *b"id";
                self.expect = Expect::Value;
                self.capture.clear();
                self.capture_overflow = false;
            }
            (b'"', Expect::Value) => {
                self.in_string = true;
                self.expect = Expect::InStringValue;
                self.capture_byte(b);
            }
            (b'{' | b'[', Expect::Value) => {
                // An object or array is no valid id.
                if self.value_is_id {
                    self.found = Found::Unusable;
                }
                self.depth += 1;
            }
            (b',', Expect::Comma) => self.expect = Expect::Key,
            // `{}` or the end of the object.
            (b'}', Expect::Comma | Expect::Key) => self.depth = 0,
            (_, Expect::Value) => {
                self.expect = Expect::InScalar;
                self.capture_byte(b);
            }
            _ => self.broken = true,
        }
    }

    fn capture_byte(&mut self, b: u8) {
        if !self.value_is_id {
            return;
        }
        if self.capture.len() < MAX_ID_BYTES {
            self.capture.push(b);
        } else {
            self.capture_overflow = true;
        }
    }

    fn end_value(&mut self) {
        self.expect = Expect::Comma;
        if !self.value_is_id {
            return;
        }
        self.found = match std::mem::take(&mut self.found) {
            Found::None if !self.capture_overflow => Found::One(std::mem::take(&mut self.capture)),
            _ => Found::Unusable,
        };
    }

    /// The id, when the whole object was seen and its id is unambiguous.
    fn finish(self) -> Option<RequestId> {
        if self.broken || !self.started || self.depth != 0 {
            return None;
        }
        match self.found {
            Found::One(raw) => serde_json::from_slice(&raw).ok(),
            Found::None | Found::Unusable => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::NumberOrString;
    use serde_json::Value;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::*;

    fn scan(bytes: &[u8]) -> Option<RequestId> {
        let mut scanner = IdScanner::default();
        // Byte by byte and all at once must agree.
        for b in bytes {
            scanner.feed(std::slice::from_ref(b));
        }
        let mut whole = IdScanner::default();
        whole.feed(bytes);
        let a = scanner.finish();
        assert_eq!(a, whole.finish());
        a
    }

    #[test]
    fn recovers_an_unambiguous_top_level_id() {
        let big = "x".repeat(1000);
        let cases: [(String, Option<RequestId>); 6] = [
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"a":"{big}"}}}}"#
                ),
                Some(NumberOrString::Number(7)),
            ),
            (
                format!(r#"{{"params":{{"id":1,"x":["{big}",{{"id":2}}]}}, "id" : "req-9" }}"#)
                    + "\n",
                Some(NumberOrString::String("req-9".into())),
            ),
            (
                "\u{feff} {\"id\":-3}\r\n".to_owned(),
                Some(NumberOrString::Number(-3)),
            ),
            (r#"{"method":"x","params":{"id":5}}"#.to_owned(), None),
            (r#"{"id":1,"id":2}"#.to_owned(), None),
            (format!(r#"{{"id":"{}"}}"#, "i".repeat(300)), None),
        ];
        for (input, want) in cases {
            assert_eq!(scan(input.as_bytes()), want, "{input:.80}");
        }
    }

    #[test]
    fn no_id_from_anything_unusual() {
        for input in [
            r#"{"id":{"x":1}}"#,
            r#"{"id":[1]}"#,
            r#"{"\u0069d":4}"#,
            r#"{"id":4"#,
            r#"{"id":4} trailing"#,
            r#"[{"id":4}]"#,
            r#"{"id":1.5}"#,
            r#"{"id":true}"#,
            r#"{"id":null}"#,
            r#"{"ids":4,"i":5}"#,
            "",
            "garbage",
            r#"{"a":"\"id\":3"}"#,
        ] {
            assert_eq!(scan(input.as_bytes()), None, "{input}");
        }
        assert_eq!(
            scan(br#"{"a":"q\\","id":"q\"x"}"#),
            Some(NumberOrString::String("q\"x".into()))
        );
    }

    /// Drives the transport over in-memory pipes: an oversized line is answered, the next line
    /// is delivered, and memory stays bounded.
    #[tokio::test]
    async fn an_oversized_line_is_answered_and_the_next_is_served() {
        let (mut client_w, server_r) = tokio::io::duplex(1 << 16);
        let (server_w, client_r) = tokio::io::duplex(1 << 16);
        let mut transport = BoundedStdio::new(server_r, server_w, 1024);
        let writer = tokio::spawn(async move {
            let big = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":41,\"method\":\"ping\",\"params\":{{\"p\":\"{}\"}}}}\n",
                "y".repeat(100_000)
            );
            client_w.write_all(big.as_bytes()).await.unwrap();
            client_w
                .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"ping\"}\n")
                .await
                .unwrap();
            client_w
        });
        let next = transport.receive().await.expect("the next line is served");
        assert!(
            transport.line.capacity() <= 1024,
            "never buffered past the bound"
        );
        let next = serde_json::to_value(&next).unwrap();
        assert_eq!(next["id"], 42);
        let _client_w = writer.await.unwrap();
        let mut replies = BufReader::new(client_r).lines();
        let reply: Value =
            serde_json::from_str(&replies.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(reply["id"], 41, "{reply}");
        assert_eq!(reply["error"]["code"], -32600, "{reply}");
        assert_eq!(reply["error"]["data"]["maxLineBytes"], 1024, "{reply}");
    }
}
