//! A read shield under the IMAP protocol parser: it follows the server's bytes (quoted strings,
//! `{n}` literals, parentheses, line kinds) and fails the connection on a response that would
//! crash imap-proto, the parser async-imap uses.
//!
//! Why: imap-proto has two crashes a server can trigger, and the shield sees every byte before the
//! parser does, so each becomes an I/O error on one connection (the pool closes it; the call
//! answers `BACKEND_UNAVAILABLE`, and a search is incomplete, never `NOT_FOUND`):
//! * it parses nested lists (BODYSTRUCTURE, ENVELOPE) by recursion with no depth bound. A
//!   BODYSTRUCTURE a few hundred levels deep — which a hostile server, or a message a stranger
//!   crafted and a lax server describes faithfully, can produce — overflows the thread's stack
//!   and aborts the whole process (measured: 1,000 levels on a 2 MiB stack in a release build,
//!   64 in a debug build). Refused beyond [`MAX_PAREN_DEPTH`]; literal contents and quoted
//!   strings are skipped, so message text full of parentheses is never counted.
//! * in a status response (`OK`, `NO`, `BAD`, `BYE`, `PREAUTH`, or a `+` continuation) whose
//!   response code is followed directly by a non-ASCII byte (`* OK [ALERT]\xd7`), it slices the
//!   text one byte in, inside a UTF-8 character, and panics (imap-proto 0.17.0
//!   `Outcome::parse`; found by the `imap_response` fuzz target). Status lines are told apart
//!   by their second word, as imap-proto does; in them, `]` followed by a byte above 0x7F is
//!   refused wherever it stands, and so is a literal (no server sends one there, and following
//!   it would let the shield and the parser disagree about where lines begin).
//!
//! Named a shield, not a guard, so it is not confused with the HTTP head checks
//! (`transport::http::guard`).
//!
//! Who may call it: `conn` (every IMAP connection reads through a [`Shield`]) and the
//! `imap_response` fuzz target (the [`Scanner`] alone).

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

/// Longest second word that can be a status (`PREAUTH`).
const STATUS_WORD_MAX: usize = 7;

/// What kind of line the scanner is on, decided by its first two words as imap-proto decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Line {
    /// In the first word (a tag or `*`); `started` once a byte of it was read.
    First { started: bool },
    /// In the second word: its first bytes, upper-cased.
    Second {
        word: [u8; STATUS_WORD_MAX],
        len: u8,
    },
    /// A status response or continuation: the rest of the line is what imap-proto reads as
    /// response code and human text.
    Status {
        after_bracket: bool,
        literal: LiteralMark,
    },
    /// Any other response: quoted strings, literals and parentheses are followed.
    Data,
}

/// How much of a literal marker (`{` digits `+`? `}` CR LF) a status line ends with so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LiteralMark {
    None,
    Open,
    Close,
    Cr,
}

impl LiteralMark {
    fn next(self, b: u8) -> Self {
        match (self, b) {
            (_, b'{') => LiteralMark::Open,
            (LiteralMark::Open, b'0'..=b'9' | b'+') => LiteralMark::Open,
            (LiteralMark::Open, b'}') => LiteralMark::Close,
            (LiteralMark::Close, b'\r') => LiteralMark::Cr,
            _ => LiteralMark::None,
        }
    }
}

const STATUS_WORDS: [&[u8]; 5] = [b"OK", b"NO", b"BAD", b"BYE", b"PREAUTH"];

/// The scanner, separate from I/O so it can be fuzzed and tested on byte strings.
#[derive(Clone, Debug)]
pub(crate) struct Scanner {
    state: State,
    line: Line,
    depth: u32,
}

impl Default for Scanner {
    fn default() -> Self {
        Self {
            state: State::Normal,
            line: Line::First { started: false },
            depth: 0,
        }
    }
}

impl Scanner {
    /// Follows `bytes`; `Err` at the first response imap-proto must not see.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<(), Refused> {
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
            if self.state == State::Normal && self.line_byte(b)? {
                continue;
            }
            self.data_byte(b)?;
        }
        Ok(())
    }

    /// Classifies the line and checks status lines; `Ok(true)` when `b` was a status line's.
    fn line_byte(&mut self, b: u8) -> Result<bool, Refused> {
        let special = matches!(b, b'"' | b'{' | b'(' | b')');
        self.line = match self.line {
            Line::Data => return Ok(false),
            Line::Status {
                after_bracket,
                literal,
            } => {
                if after_bracket && b >= 0x80 {
                    return Err(Refused::StatusText);
                }
                if b == b'\n' {
                    if literal == LiteralMark::Cr {
                        return Err(Refused::StatusText);
                    }
                    self.new_line();
                } else {
                    self.line = Line::Status {
                        after_bracket: b == b']',
                        literal: literal.next(b),
                    };
                }
                return Ok(true);
            }
            Line::First { started: false } if b == b'+' => Line::Status {
                after_bracket: false,
                literal: LiteralMark::None,
            },
            Line::First { .. } if b == b' ' => Line::Second {
                word: [0; STATUS_WORD_MAX],
                len: 0,
            },
            Line::First { .. } | Line::Second { .. } if special || b == b'\n' => Line::Data,
            Line::First { .. } => Line::First { started: true },
            Line::Second { word, len } if matches!(b, b' ' | b'\r') => {
                if STATUS_WORDS.contains(&&word[..usize::from(len)]) {
                    // The separator itself is status text (a CR ends the line's text).
                    self.line = Line::Status {
                        after_bracket: false,
                        literal: LiteralMark::None,
                    };
                    return Ok(true);
                }
                Line::Data
            }
            Line::Second { mut word, len } => {
                if usize::from(len) == STATUS_WORD_MAX {
                    Line::Data
                } else {
                    word[usize::from(len)] = b.to_ascii_uppercase();
                    Line::Second { word, len: len + 1 }
                }
            }
        };
        Ok(false)
    }

    /// Follows quoted strings, literals and parentheses (every line but status lines).
    fn data_byte(&mut self, b: u8) -> Result<(), Refused> {
        self.state = match (self.state, b) {
            (State::Normal, b'(') => {
                self.depth += 1;
                if self.depth > MAX_PAREN_DEPTH {
                    return Err(Refused::TooDeep);
                }
                State::Normal
            }
            (State::Normal, b')') => {
                self.depth = self.depth.saturating_sub(1);
                State::Normal
            }
            // A response ends at a line end outside literals and quoted strings; a line end
            // inside a quoted string is not valid IMAP: resynchronise there rather than read on.
            (State::Normal | State::Quoted | State::QuotedEscape, b'\n') => {
                self.new_line();
                State::Normal
            }
            (State::Normal, b'"') => State::Quoted,
            (State::Normal, b'{') => State::LiteralLength(0),
            (State::Quoted, b'\\') => State::QuotedEscape,
            (State::Quoted, b'"') => State::Normal,
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
        Ok(())
    }

    fn new_line(&mut self) {
        self.depth = 0;
        self.line = Line::First { started: false };
    }
}

/// A response the shield keeps from the parser.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    #[error("the mail server sent a response nested deeper than {MAX_PAREN_DEPTH} levels")]
    TooDeep,
    #[error("the mail server sent a status response the IMAP parser cannot read safely")]
    StatusText,
}

/// `inner` with every byte read checked by a [`Scanner`].
#[derive(Debug)]
pub(crate) struct Shield<S> {
    inner: S,
    scanner: Scanner,
    refused: Option<Refused>,
    /// A read found the end of the stream. async-imap ends a response it was still reading at
    /// the end of the stream as if it were complete (a STATUS without counts, a FETCH or SEARCH
    /// without its tail), so its callers ask this before trusting an answer.
    eof: bool,
}

impl<S> Shield<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            scanner: Scanner::default(),
            refused: None,
            eof: false,
        }
    }

    /// Whether the server's side of the connection has ended.
    pub(crate) fn hit_eof(&self) -> bool {
        self.eof
    }

    pub(crate) fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Shield<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(refused) = self.refused {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, refused)));
        }
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() == before && buf.remaining() > 0 {
                    this.eof = true;
                }
                if let Err(refused) = this.scanner.feed(&buf.filled()[before..]) {
                    // Nothing of this read reaches the parser.
                    buf.set_filled(before);
                    this.refused = Some(refused);
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, refused)));
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Shield<S> {
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
            Err(Refused::TooDeep)
        );
        assert_eq!(
            Scanner::default().feed(&nested(100_000)),
            Err(Refused::TooDeep)
        );
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

    fn verdict(bytes: &[u8]) -> Result<(), Refused> {
        let whole = Scanner::default().feed(bytes);
        let mut s = Scanner::default();
        let split = bytes
            .iter()
            .try_for_each(|b| s.feed(std::slice::from_ref(b)));
        assert_eq!(whole, split, "a read may end anywhere");
        whole
    }

    #[test]
    fn a_status_code_followed_by_a_non_ascii_byte_is_refused() {
        // The fuzz finding, cut down: imap-proto 0.17.0 panics on each of these.
        for line in [
            &b"* OK [COPYUID 9 1:2 20:21]\xd7moved\r\n"[..],
            b"* OK [ALERT]\xc3\xa9\r\n",
            b"a3 no [PARSE]\xff\r\n",
            b"* BYE [ALERT]\x80",
            b"+[ALERT]\xd7\r\n",
            b"+ [ALERT]\xd7\r\n",
            b"* PREAUTH [BADCHARSET (\"a]\")]\xd7\r\n",
            // After an ordinary response, and after a literal that was fully read.
            b"* 1 FETCH (UID 7 BODY[] {3}\r\n(((\r\n* OK [ALERT]\xd7\r\n",
        ] {
            assert_eq!(verdict(line), Err(Refused::StatusText), "{line:?}");
        }
        // A literal in a status line would let the shield and the parser disagree on lines.
        assert_eq!(
            verdict(b"* NO [BADCHARSET ({5}\r\nab]\xd7c)]\r\n"),
            Err(Refused::StatusText)
        );
    }

    #[test]
    fn non_ascii_text_elsewhere_passes() {
        for line in [
            // Human text after the code's space, and without a code.
            &b"* OK [ALERT] \xc3\xa9t\xc3\xa9\r\n"[..],
            b"a1 NO \xd7 nope]\r\n",
            // `]` then non-ASCII inside a quoted string or a literal of a data response.
            b"* 2 FETCH (UID 8 ENVELOPE (NIL \"[Extern]\xc3\x9cber\" NIL))\r\n",
            b"* 3 FETCH (UID 9 BODY[] {4}\r\n]\xc3\xa9x)\r\n",
            // A data response whose second word merely starts like a status.
            b"* OKAY [X]\xd7\r\n",
            b"* LIST () \"/\" \"[x]\xd7\"\r\n",
        ] {
            assert_eq!(verdict(line), Ok(()), "{line:?}");
        }
    }

    #[tokio::test]
    async fn the_stream_fails_instead_of_handing_the_parser_a_deep_response() {
        use tokio::io::AsyncReadExt as _;
        let deep = nested(1_000);
        let mut shielded = Shield::new(&deep[..]);
        let mut out = Vec::new();
        let err = shielded.read_to_end(&mut out).await.expect_err("refused");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let ok = nested(5);
        let mut out = Vec::new();
        Shield::new(&ok[..])
            .read_to_end(&mut out)
            .await
            .expect("passes");
        assert_eq!(out, ok);
        let mut shielded = Shield::new(&ok[..]);
        assert!(!shielded.hit_eof());
        shielded.read_to_end(&mut Vec::new()).await.expect("reads");
        assert!(shielded.hit_eof(), "the end of the stream is remembered");
    }
}
