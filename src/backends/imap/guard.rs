//! A read guard under the IMAP protocol parser: it follows the server's bytes (quoted strings,
//! `{n}` literals, parentheses) and fails the connection when a response nests parentheses
//! deeper than [`MAX_PAREN_DEPTH`].
//!
//! Why: imap-proto, the parser async-imap uses, parses nested lists (BODYSTRUCTURE, ENVELOPE)
//! by recursion with no depth bound. A BODYSTRUCTURE a few hundred levels deep — which a
//! hostile server, or a message a stranger crafted and a lax server describes faithfully, can
//! produce — overflows the thread's stack and aborts the whole process (measured: 1,000 levels
//! on a 2 MiB stack in a release build, 64 in a debug build). The guard sees every byte before
//! the parser does, so such a response becomes an I/O error on one connection (the pool closes
//! it; the call answers `BACKEND_UNAVAILABLE`) instead of a crash. Literal contents and quoted
//! strings are skipped, so message text full of parentheses is never counted.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Deepest parenthesis nesting accepted in one response line. Real BODYSTRUCTUREs nest one
/// level per MIME level plus a few for parameters and envelopes; mailgate's own walk stops at
/// 32 MIME levels (`structure`), and servers limit MIME nesting themselves (Dovecot: 100 parts).
pub(crate) const MAX_PAREN_DEPTH: u32 = 48;

/// Where the scanner is in the server's byte stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Normal,
    Quoted,
    QuotedEscape,
    /// Inside `{…}`: the literal's length so far.
    LiteralLength(u64),
    /// After `}`: expecting CR then LF.
    LiteralCr(u64),
    LiteralLf(u64),
    /// Inside a literal: bytes left to skip.
    Literal(u64),
}

/// The scanner, separate from I/O so it can be fuzzed and tested on byte strings.
#[derive(Clone, Debug)]
pub(crate) struct Scanner {
    state: State,
    depth: u32,
}

impl Default for Scanner {
    fn default() -> Self {
        Self {
            state: State::Normal,
            depth: 0,
        }
    }
}

impl Scanner {
    /// Follows `bytes`; `Err` when a response nests deeper than [`MAX_PAREN_DEPTH`].
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<(), TooDeep> {
        let mut i = 0;
        while i < bytes.len() {
            if let State::Literal(left) = self.state {
                let take = usize::try_from(left)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len() - i);
                i += take;
                let left = left - take as u64;
                self.state = if left == 0 {
                    State::Normal
                } else {
                    State::Literal(left)
                };
                continue;
            }
            let b = bytes[i];
            i += 1;
            self.state = match (self.state, b) {
                (State::Normal, b'(') => {
                    self.depth += 1;
                    if self.depth > MAX_PAREN_DEPTH {
                        return Err(TooDeep);
                    }
                    State::Normal
                }
                (State::Normal, b')') => {
                    self.depth = self.depth.saturating_sub(1);
                    State::Normal
                }
                // A response ends at a line end outside literals and quoted strings.
                (State::Normal, b'\n') => {
                    self.depth = 0;
                    State::Normal
                }
                (State::Normal, b'"') => State::Quoted,
                (State::Normal, b'{') => State::LiteralLength(0),
                (State::Quoted, b'\\') => State::QuotedEscape,
                (State::Quoted, b'"') => State::Normal,
                (State::Quoted, b'\n') => {
                    // Not valid IMAP; resynchronise at the line end rather than read on.
                    self.depth = 0;
                    State::Normal
                }
                (State::QuotedEscape, _) | (State::Quoted, _) => State::Quoted,
                (State::LiteralLength(n), d @ b'0'..=b'9') => {
                    State::LiteralLength(n.saturating_mul(10).saturating_add(u64::from(d - b'0')))
                }
                (State::LiteralLength(n), b'+') => State::LiteralLength(n),
                (State::LiteralLength(n), b'}') => State::LiteralCr(n),
                (State::LiteralCr(n), b'\r') => State::LiteralLf(n),
                (State::LiteralLf(n), b'\n') if n > 0 => State::Literal(n),
                (State::LiteralLf(_), b'\n') => State::Normal,
                // Not a literal after all (or a malformed one): back to plain text.
                (State::LiteralLength(_) | State::LiteralCr(_) | State::LiteralLf(_), _) => {
                    State::Normal
                }
                (State::Normal, _) => State::Normal,
                (State::Literal(_), _) => self.state,
            };
        }
        Ok(())
    }
}

/// A response nested deeper than [`MAX_PAREN_DEPTH`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the mail server sent a response nested deeper than {MAX_PAREN_DEPTH} levels")]
pub(crate) struct TooDeep;

/// `inner` with every byte read checked by a [`Scanner`].
#[derive(Debug)]
pub(crate) struct DepthGuard<S> {
    inner: S,
    scanner: Scanner,
    failed: bool,
}

impl<S> DepthGuard<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            scanner: Scanner::default(),
            failed: false,
        }
    }

    pub(crate) fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for DepthGuard<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.failed {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, TooDeep)));
        }
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if this.scanner.feed(&buf.filled()[before..]).is_err() {
                    // Nothing of this read reaches the parser.
                    buf.set_filled(before);
                    this.failed = true;
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, TooDeep)));
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for DepthGuard<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> Vec<u8> {
        let mut line = b"* 1 FETCH (BODYSTRUCTURE ".to_vec();
        line.extend(std::iter::repeat_n(b'(', depth));
        line.extend_from_slice(b"\"text\" \"plain\" NIL NIL NIL \"7bit\" 1 1");
        for _ in 0..depth {
            line.extend_from_slice(b" \"mixed\")");
        }
        line.extend_from_slice(b")\r\n");
        line
    }

    #[test]
    fn deep_nesting_is_refused_and_ordinary_responses_pass() {
        // `FETCH (` is one level: BODYSTRUCTURE may nest MAX_PAREN_DEPTH - 1 more.
        assert!(
            Scanner::default()
                .feed(&nested(MAX_PAREN_DEPTH as usize - 1))
                .is_ok()
        );
        assert_eq!(
            Scanner::default().feed(&nested(MAX_PAREN_DEPTH as usize)),
            Err(TooDeep)
        );
        assert_eq!(Scanner::default().feed(&nested(100_000)), Err(TooDeep));
        // Depth resets at each line end: many shallow lines are fine.
        let mut s = Scanner::default();
        for _ in 0..1_000 {
            s.feed(&nested(10)).expect("shallow");
        }
    }

    #[test]
    fn parentheses_inside_literals_and_quoted_strings_are_not_counted() {
        let body = "(".repeat(500);
        let mut line = format!("* 1 FETCH (UID 7 BODY[] {{{}}}\r\n", body.len()).into_bytes();
        line.extend_from_slice(body.as_bytes());
        line.extend_from_slice(b")\r\n* 2 FETCH (UID 8 ENVELOPE (\"(((((\\\"((((\" NIL))\r\n");
        // Fed byte by byte too: a read may end anywhere.
        assert!(Scanner::default().feed(&line).is_ok());
        let mut s = Scanner::default();
        for b in &line {
            s.feed(std::slice::from_ref(b)).expect("split anywhere");
        }
    }

    #[tokio::test]
    async fn the_stream_fails_instead_of_handing_the_parser_a_deep_response() {
        use tokio::io::AsyncReadExt as _;
        let deep = nested(1_000);
        let mut guarded = DepthGuard::new(&deep[..]);
        let mut out = Vec::new();
        let err = guarded.read_to_end(&mut out).await.expect_err("refused");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let ok = nested(5);
        let mut out = Vec::new();
        DepthGuard::new(&ok[..])
            .read_to_end(&mut out)
            .await
            .expect("passes");
        assert_eq!(out, ok);
    }
}
