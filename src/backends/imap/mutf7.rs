//! Modified UTF-7 mailbox names (RFC 3501 §5.1.3): `decode` turns a name the server sent into
//! its display form and `encode` turns a display name into the one canonical wire form. A small
//! codec on the `base64` crate (its `IMAP_MUTF7` alphabet, `,` for `/`, no padding) and std's
//! `encode_utf16`/`char::decode_utf16`, because the crates.io codec (`utf7-imap` 0.3.2) unwraps
//! on malformed base64, so a hostile server could panic us, and pulls an old `base64`.
//! Invariant: `decode` never panics and accepts only canonical input, so for every `w` it
//! accepts `encode(decode(w)) == w` (a folder id built from the decoded name reaches the same
//! mailbox), and `decode(encode(s)) == Some(s)` for every string. Refused (`None`): any byte
//! outside printable ASCII, an unterminated shift, bad or non-canonical base64 (trailing bits
//! set), an odd byte count, an unpaired surrogate, a shifted run that holds a printable ASCII
//! character (RFC: "MUST NOT be used to represent any printing US-ASCII character"; this
//! includes `&`, which has its own `&-`), and a null shift (`-&` between two runs, "not
//! permitted"). Control characters in a shifted run are legal modified UTF-7 and are decoded
//! as they are; callers that show names decide what to do with them. Called by the IMAP
//! backend for every name LIST returns and every name it sends.

use base64::Engine as _;
use base64::alphabet::IMAP_MUTF7;
use base64::engine::general_purpose::{GeneralPurpose, NO_PAD};

/// RFC 3501's modified base64: `,` instead of `/`, never padded. The default config refuses
/// non-zero trailing bits, which keeps decoding canonical.
const MODIFIED_BASE64: GeneralPurpose = GeneralPurpose::new(&IMAP_MUTF7, NO_PAD);

/// The display form of a wire mailbox name; `None` when it is not valid, canonical modified
/// UTF-7 (see the module doc for what is refused).
pub(crate) fn decode(wire: &str) -> Option<String> {
    let mut name = String::with_capacity(wire.len());
    let mut rest = wire;
    // Whether the last thing read was a shifted run: a run right after it is a null shift.
    let mut after_run = false;
    while let Some(first) = rest.chars().next() {
        if first == '&' {
            let (run, tail) = rest[1..].split_once('-')?;
            rest = tail;
            if run.is_empty() {
                name.push('&');
                after_run = false;
                continue;
            }
            if after_run {
                return None;
            }
            decode_run(run, &mut name)?;
            after_run = true;
        } else if is_printable(first) {
            name.push(first);
            rest = &rest[1..];
            after_run = false;
        } else {
            return None;
        }
    }
    Some(name)
}

/// The canonical wire form of a mailbox name: printable ASCII as itself, `&` as `&-`, every
/// maximal run of other characters as one shifted run of UTF-16BE in modified base64.
// The store never encodes (folder ids carry wire names); the round-trip tests and the fuzz
// oracle do.
#[cfg(any(test, fuzzing))]
pub(crate) fn encode(name: &str) -> String {
    let mut wire = String::with_capacity(name.len());
    let mut run: Vec<u8> = Vec::new();
    for c in name.chars() {
        if is_printable(c) {
            flush_run(&mut run, &mut wire);
            wire.push(c);
            if c == '&' {
                wire.push('-');
            }
        } else {
            let mut units = [0_u16; 2];
            for unit in c.encode_utf16(&mut units) {
                run.extend_from_slice(&unit.to_be_bytes());
            }
        }
    }
    flush_run(&mut run, &mut wire);
    wire
}

/// Printable US-ASCII (0x20–0x7e): the characters that stand for themselves (`&` as `&-`).
fn is_printable(c: char) -> bool {
    matches!(c, ' '..='~')
}

/// Appends `&<base64>-` for the pending UTF-16BE bytes, if any, and clears them.
#[cfg(any(test, fuzzing))]
fn flush_run(run: &mut Vec<u8>, wire: &mut String) {
    if run.is_empty() {
        return;
    }
    wire.push('&');
    MODIFIED_BASE64.encode_string(&*run, wire);
    wire.push('-');
    run.clear();
}

/// Decodes one shifted run (the text between `&` and `-`, non-empty) onto `name`.
fn decode_run(run: &str, name: &mut String) -> Option<()> {
    let bytes = MODIFIED_BASE64.decode(run).ok()?;
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    let units = bytes
        .chunks_exact(2)
        .map(|pair| u16::from_be_bytes([pair[0], pair[1]]));
    for decoded in char::decode_utf16(units) {
        let c = decoded.ok()?;
        if is_printable(c) {
            return None;
        }
        name.push(c);
    }
    Some(())
}

/// The oracle of the `imap_query` fuzz target for names: `data` (lossy UTF-8) is decoded
/// without a panic and, when accepted, is canonical (`encode` gives it back); plain printable
/// ASCII without `&` is accepted as itself; `encode` of it is printable ASCII and decodes back
/// to it. Panics with `oracle: …` on a violation.
#[cfg(any(test, fuzzing))]
pub(crate) fn check_name(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let decoded = decode(&text);
    if let Some(name) = &decoded {
        assert_eq!(
            encode(name),
            text,
            "oracle: an accepted wire name is canonical"
        );
    }
    if text.chars().all(|c| c != '&' && matches!(c, ' '..='~')) {
        assert_eq!(
            decoded.as_deref(),
            Some(&*text),
            "oracle: plain ASCII is itself"
        );
    }
    let wire = encode(&text);
    assert!(
        wire.bytes().all(|b| (0x20..=0x7e).contains(&b)),
        "oracle: an encoded name is printable ASCII: {wire:?}"
    );
    assert_eq!(
        decode(&wire).as_deref(),
        Some(&*text),
        "oracle: decode(encode(name)) is the name"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc_3501_example_round_trips() {
        let wire = "~peter/mail/&U,BTFw-/&ZeVnLIqe-";
        let name = "~peter/mail/台北/日本語";
        assert_eq!(decode(wire).as_deref(), Some(name));
        assert_eq!(encode(name), wire);
    }

    #[test]
    fn ampersand_is_ampersand_dash() {
        assert_eq!(decode("&-").as_deref(), Some("&"));
        assert_eq!(decode("Tom &- Jerry").as_deref(), Some("Tom & Jerry"));
        assert_eq!(encode("Tom & Jerry"), "Tom &- Jerry");
        assert_eq!(encode("&&"), "&-&-");
        // A literal `&` right after a shifted run is not a null shift.
        assert_eq!(encode("£&"), "&AKM-&-");
        assert_eq!(decode("&AKM-&-").as_deref(), Some("£&"));
    }

    #[test]
    fn plain_ascii_passes_through() {
        let name = "INBOX/Sent Items [2026] ~x \"q\" \\b";
        assert_eq!(encode(name), name);
        assert_eq!(decode(name).as_deref(), Some(name));
        assert_eq!(decode("").as_deref(), Some(""));
    }

    #[test]
    fn non_bmp_characters_use_surrogate_pairs() {
        // U+1F600 is D83D DE00 in UTF-16.
        assert_eq!(encode("😀"), "&2D3eAA-");
        assert_eq!(decode("&2D3eAA-").as_deref(), Some("😀"));
    }

    #[test]
    fn control_characters_are_shifted_and_decoded() {
        assert_eq!(encode("a\tb"), "a&AAk-b");
        assert_eq!(decode("a&AAk-b").as_deref(), Some("a\tb"));
    }

    #[test]
    fn malformed_names_are_refused() {
        for wire in [
            "&",          // unterminated shift
            "abc&U,BT",   // unterminated shift
            "&U,BTFw",    // no closing dash
            "&U/BTFw-",   // `/` is not in the modified alphabet
            "&U,BTFw=-",  // padding
            "&U,B!Fw-",   // not base64
            "&AKM=-",     // padding
            "&AKN-",      // trailing bits set (non-canonical)
            "&AA-",       // one byte: odd count
            "&AKMA-",     // three bytes: odd count
            "&2D0-",      // unpaired high surrogate
            "&3gA-",      // unpaired low surrogate
            "&AGE-",      // "a" shifted: printable ASCII must stand for itself
            "&ACY-",      // "&" shifted
            "&AKM-&AKM-", // null shift between two runs
            "a\tb",       // raw control character
            "a\u{7f}b",   // raw DEL
            "台北",       // raw 8-bit
            "a\rb",       // raw CR
            "&A",         // one base64 character
            "&-&",        // unterminated second shift
        ] {
            assert_eq!(decode(wire), None, "{wire:?}");
        }
    }

    /// Printable ASCII (with `&`), controls, and characters from the BMP and beyond.
    fn name_char() -> impl Strategy<Value = char> {
        prop_oneof![
            3 => proptest::char::range(' ', '~'),
            1 => Just('&'),
            1 => proptest::char::range('\u{0}', '\u{1f}'),
            2 => proptest::char::range('\u{80}', '\u{ffff}'),
            1 => proptest::char::range('\u{10000}', '\u{10ffff}'),
        ]
    }

    proptest! {
        #[test]
        fn decode_inverts_encode(chars in proptest::collection::vec(name_char(), 0..40)) {
            let name: String = chars.into_iter().collect();
            let wire = encode(&name);
            prop_assert!(wire.chars().all(is_printable), "{wire:?}");
            prop_assert_eq!(decode(&wire), Some(name));
        }

        #[test]
        fn decode_accepts_only_canonical_names(wire in any::<String>()) {
            if let Some(name) = decode(&wire) {
                prop_assert_eq!(encode(&name), wire);
            }
        }

        #[test]
        fn fuzz_oracle_holds(data in proptest::collection::vec(any::<u8>(), 0..40)) {
            check_name(&data);
        }

        #[test]
        fn decode_never_panics_on_near_misses(
            wire in "[&A-Za-z0-9+,/=-]{0,24}",
        ) {
            if let Some(name) = decode(&wire) {
                prop_assert_eq!(encode(&name), wire);
            }
        }
    }
}
