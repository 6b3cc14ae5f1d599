//! Continuation cursors: the opaque `nextCursor` an answer cut by a limit carries, which the same
//! tool accepts as `cursor` to go on exactly where the answer stopped.
//!
//! A cursor is `base64url(version | key id | position | tag)`: the position is the tool's own
//! (a body offset and a recipient offset; how many results were delivered; …), and the tag is an
//! HMAC-SHA256 (cut to 16 bytes) under the issuing key of the instance's key ring
//! ([`CursorKeys`]), over the caller, the tool's name, the alias and the request's other
//! arguments in canonical form (object keys sorted, without `cursor` and the offsets it
//! replaces), and the position. So a cursor can be neither forged nor altered, and one taken
//! from another tool, another alias or other criteria does not verify: each is
//! `INVALID_ARGUMENT`. Any key of the ring redeems, so a cursor continues on every instance that
//! reads the same key ring file, and after a restart; one whose key the ring no longer holds
//! (a process's own key, or a key rotated out) is refused as expired, with what to do. Nothing
//! in a cursor is secret or mail-derived: it is a position, authenticated.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::Mac as _;
use serde_json::Value;

use super::{ErrorCode, ToolError};
use crate::coordination::CursorKeys;
use crate::coordination::cursor_keys::{CursorKey, KEY_ID_BYTES};

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

const VERSION: u8 = 1;
const TAG_BYTES: usize = 16;
/// Longest cursor text accepted (a real one is about 60 characters).
pub(crate) const MAX_CURSOR_CHARS: usize = 200;

/// Who signs and checks a call's cursors: the caller they are bound to and the instance's keys.
#[derive(Clone, Copy)]
pub(crate) struct Signer<'a> {
    /// `CallScope::cursor_signer`: a cursor issued to one person is refused for another.
    pub(crate) caller: &'a str,
    pub(crate) keys: &'a CursorKeys,
}

/// Where a continuation starts: up to two counters, their meaning the tool's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Position {
    pub(crate) first: u64,
    pub(crate) second: u64,
}

/// What a cursor is bound to: the caller, the tool, the alias and the request's other
/// arguments.
pub(crate) struct Binding<'a> {
    pub(crate) signer: Signer<'a>,
    pub(crate) tool: &'static str,
    pub(crate) alias: &'a str,
    /// The request's arguments without `cursor` and the offsets it replaces.
    pub(crate) request: &'a Value,
}

impl Binding<'_> {
    /// Where a continuation with one counter starts: `cursor`'s first counter, 0 without one.
    pub(crate) fn start(&self, cursor: Option<&str>) -> Result<u64, ToolError> {
        cursor.map_or(Ok(0), |c| redeem(self, c).map(|at| at.first))
    }

    /// A cursor for a continuation with one counter, at `first`.
    pub(crate) fn at(&self, first: u64) -> String {
        issue(self, Position { first, second: 0 })
    }
}

/// A cursor for `position` of the request `binding` describes.
pub(crate) fn issue(binding: &Binding<'_>, position: Position) -> String {
    let key = binding.signer.keys.issuing();
    let mut bytes = Vec::with_capacity(1 + KEY_ID_BYTES + 16 + TAG_BYTES);
    bytes.push(VERSION);
    bytes.extend_from_slice(key.id());
    bytes.extend_from_slice(&position.first.to_le_bytes());
    bytes.extend_from_slice(&position.second.to_le_bytes());
    let tag = tag(key, binding, &bytes);
    bytes.extend_from_slice(&tag[..TAG_BYTES]);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The position of `cursor` when it was issued under a key of this ring for exactly this
/// request.
pub(crate) fn redeem(binding: &Binding<'_>, cursor: &str) -> Result<Position, ToolError> {
    let invalid = |why: &'static str| {
        ToolError::new(
            ErrorCode::InvalidArgument,
            format!(
                "cursor: {why}; pass nextCursor unchanged, with the same tool, mailbox and arguments"
            ),
        )
    };
    if cursor.len() > MAX_CURSOR_CHARS {
        return Err(invalid("not a cursor of this server"));
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| invalid("not a cursor of this server"))?;
    let body_len = 1 + KEY_ID_BYTES + 16;
    if bytes.len() != body_len + TAG_BYTES || bytes[0] != VERSION {
        return Err(invalid("not a cursor of this server"));
    }
    let Some(key) = binding.signer.keys.find(&bytes[1..=KEY_ID_BYTES]) else {
        return Err(ToolError::new(
            ErrorCode::InvalidArgument,
            "cursor: expired (signed with a key this server no longer holds: it restarted, or \
             the key was rotated out); repeat the request without cursor",
        ));
    };
    let (body, given) = bytes.split_at(body_len);
    mac(key, binding, body)
        .verify_truncated_left(given)
        .map_err(|_| invalid("it does not belong to this request (altered, or issued for another tool, mailbox or arguments)"))?;
    let counter = |at: usize| {
        let mut n = [0u8; 8];
        n.copy_from_slice(&body[at..at + 8]);
        u64::from_le_bytes(n)
    };
    Ok(Position {
        first: counter(1 + KEY_ID_BYTES),
        second: counter(1 + KEY_ID_BYTES + 8),
    })
}

fn mac(key: &CursorKey, binding: &Binding<'_>, body: &[u8]) -> HmacSha256 {
    // A key of any length is valid for HMAC; this cannot fail.
    let mut mac = <HmacSha256 as hmac::KeyInit>::new_from_slice(key.secret())
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    // Length-prefixed parts: no two different bindings feed the same bytes.
    for part in [
        binding.signer.caller.as_bytes(),
        binding.tool.as_bytes(),
        binding.alias.as_bytes(),
        canonical(binding.request).as_bytes(),
        body,
    ] {
        mac.update(&(part.len() as u64).to_le_bytes());
        mac.update(part);
    }
    mac
}

fn tag(key: &CursorKey, binding: &Binding<'_>, body: &[u8]) -> Vec<u8> {
    mac(key, binding, body).finalize().into_bytes().to_vec()
}

/// A signer over one ring of keys drawn for the test process.
#[cfg(any(test, fuzzing))]
pub(crate) fn test_signer(caller: &'static str) -> Signer<'static> {
    static KEYS: std::sync::LazyLock<CursorKeys> =
        std::sync::LazyLock::new(CursorKeys::for_this_process);
    Signer {
        caller,
        keys: &KEYS,
    }
}

/// Fuzzing oracle (`fuzzing::mcp_surface`): arbitrary text never redeems unless it is exactly a
/// cursor issued for the request; an issued cursor redeems to its position and nowhere else.
#[cfg(fuzzing)]
pub(crate) fn fuzz(data: &[u8]) {
    let request = serde_json::json!({ "messageId": String::from_utf8_lossy(data) });
    let b = Binding {
        signer: test_signer("operator"),
        tool: "get_message",
        alias: "finance",
        request: &request,
    };
    let text = String::from_utf8_lossy(data);
    let position = Position {
        first: data.len() as u64,
        second: u64::from(data.first().copied().unwrap_or(0)),
    };
    let issued = issue(&b, position);
    if let Ok(found) = redeem(&b, &text) {
        assert_eq!(
            text,
            issued.as_str(),
            "oracle: only an issued cursor redeems"
        );
        assert_eq!(found, position);
    }
    assert_eq!(
        redeem(&b, &issued).ok(),
        Some(position),
        "oracle: round trip"
    );
    let other = Binding {
        tool: "list_attachments",
        ..b
    };
    assert!(
        redeem(&other, &issued).is_err(),
        "oracle: bound to the tool"
    );
}

/// JSON text with every object's keys sorted, whatever order the client sent them in.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::from(k.as_str()), canonical(&map[k])))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", items.join(","))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn binding<'a>(tool: &'static str, alias: &'a str, request: &'a Value) -> Binding<'a> {
        Binding {
            signer: test_signer("operator"),
            tool,
            alias,
            request,
        }
    }

    #[test]
    fn a_cursor_redeems_only_for_its_own_request() {
        let request = json!({ "criteria": { "query": "invoice", "maxResults": 5 } });
        let reordered: Value =
            serde_json::from_str(r#"{"criteria":{"maxResults":5,"query":"invoice"}}"#).unwrap();
        let at = Position {
            first: 10,
            second: 3,
        };
        let cursor = issue(&binding("search_mailbox", "finance", &request), at);
        assert!(cursor.len() < 80, "{cursor}");
        assert_eq!(
            redeem(&binding("search_mailbox", "finance", &reordered), &cursor).unwrap(),
            at
        );
        let other = json!({ "criteria": { "query": "receipt", "maxResults": 5 } });
        for (b, what) in [
            (binding("list_messages", "finance", &request), "tool"),
            (binding("search_mailbox", "personal", &request), "alias"),
            (binding("search_mailbox", "finance", &other), "criteria"),
        ] {
            let e = redeem(&b, &cursor).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidArgument, "{what}");
            assert!(
                e.message.contains("does not belong"),
                "{what}: {}",
                e.message
            );
        }
    }

    #[test]
    fn forged_altered_foreign_and_expired_cursors_are_refused() {
        let request = json!({});
        let b = binding("get_message", "finance", &request);
        let cursor = issue(
            &b,
            Position {
                first: 1,
                second: 0,
            },
        );
        let mut bytes = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
        // Altered position.
        bytes[1 + KEY_ID_BYTES] ^= 1;
        let altered = URL_SAFE_NO_PAD.encode(&bytes);
        assert!(
            redeem(&b, &altered)
                .unwrap_err()
                .message
                .contains("does not belong")
        );
        // Another process's key id.
        let mut foreign = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
        foreign[1] ^= 0xff;
        let expired = redeem(&b, &URL_SAFE_NO_PAD.encode(&foreign)).unwrap_err();
        assert!(expired.message.contains("expired"), "{}", expired.message);
        for junk in ["", "!!", "AAAA", &"A".repeat(300)] {
            let e = redeem(&b, junk).unwrap_err();
            assert!(e.message.contains("not a cursor"), "{junk}: {}", e.message);
        }
    }

    #[test]
    fn a_cursor_continues_on_every_ring_that_holds_its_key() {
        let secret = |b: u8| URL_SAFE_NO_PAD.encode([b; 32]);
        let first = CursorKeys::parse(secret(1).as_bytes()).unwrap();
        let rotated =
            CursorKeys::parse(format!("{}\n{}\n", secret(2), secret(1)).as_bytes()).unwrap();
        let dropped = CursorKeys::parse(secret(2).as_bytes()).unwrap();
        let request = json!({ "messageId": "m1" });
        let on = |keys| Binding {
            signer: Signer {
                caller: "operator",
                keys,
            },
            tool: "get_message",
            alias: "finance",
            request: &request,
        };
        let at = Position {
            first: 7,
            second: 0,
        };
        // Another instance (or this one after a restart) reading a ring with the key.
        let cursor = issue(&on(&first), at);
        assert_eq!(redeem(&on(&rotated), &cursor).unwrap(), at);
        // A ring that issues with a newer key: the older ring cannot check its cursors.
        let newer = issue(&on(&rotated), at);
        assert!(
            redeem(&on(&first), &newer)
                .unwrap_err()
                .message
                .contains("expired")
        );
        // The key rotated out: its cursors expire.
        let e = redeem(&on(&dropped), &cursor).unwrap_err();
        assert!(e.message.contains("expired"), "{}", e.message);
    }

    proptest::proptest! {
        /// Any text at all redeems only when it is exactly a cursor this process issued.
        #[test]
        fn arbitrary_text_never_redeems(text in "[A-Za-z0-9_-]{0,80}") {
            let request = json!({ "messageId": "m1" });
            let b = binding("get_message", "finance", &request);
            proptest::prop_assert!(redeem(&b, &text).is_err());
        }
    }
}
