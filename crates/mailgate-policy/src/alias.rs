//! Mailbox aliases: the only way a caller names a mailbox.
//!
//! Invariant: an [`Alias`] is 1–64 characters long and matches [`ALIAS_PATTERN`]
//! (`^[a-z0-9][a-z0-9_-]*$`, lowercase ASCII only). It is never an address, so an alias can be
//! logged, echoed in tool results and used as a cache-key component without leaking anything.
//!
//! Who may call it: anyone. The config loader builds the allowlist from aliases; tools parse the
//! caller's `mailbox` argument with [`Alias::parse`] and then look it up in the config. Parsing
//! does not lower-case: callers that accept case-insensitive input lower-case first, on purpose,
//! so the allowlist match stays exact.

use std::fmt;

/// Maximum alias length in characters (ASCII, so also bytes).
pub(crate) const ALIAS_MAX_LEN: usize = 64;

/// The alias pattern, published in JSON schemas and error messages.
#[cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "for the tool input schemas; the unit tests check it against parse"
    )
)]
pub(crate) const ALIAS_PATTERN: &str = r"^[a-z0-9][a-z0-9_-]*$";

/// A validated mailbox alias (see the module doc for the invariant).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct Alias(String);

/// Why a string is not an alias. Messages never echo the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AliasError {
    #[error("alias must not be empty")]
    Empty,
    #[error("alias must be at most 64 characters")]
    TooLong,
    #[error("alias must match ^[a-z0-9][a-z0-9_-]*$ (lowercase letters, digits, '_' and '-')")]
    Pattern,
}

impl Alias {
    /// Parses an alias: trims surrounding whitespace, then requires 1–64 characters matching
    /// [`ALIAS_PATTERN`]. Upper-case input is refused, not folded.
    pub fn parse(s: &str) -> Result<Alias, AliasError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(AliasError::Empty);
        }
        if s.len() > ALIAS_MAX_LEN {
            // `len` counts bytes; any non-ASCII input fails the pattern below anyway, so a
            // byte count can only reject strings that would be rejected regardless.
            return Err(AliasError::TooLong);
        }
        let mut bytes = s.bytes();
        let first_ok = bytes
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        let rest_ok =
            bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if first_ok && rest_ok {
            Ok(Alias(s.to_owned()))
        } else {
            Err(AliasError::Pattern)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Alias {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<&str> for Alias {
    type Error = AliasError;

    fn try_from(s: &str) -> Result<Self, Self::Error> {
        Alias::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_valid_aliases_and_trims() {
        for ok in ["a", "0", "finance", "support-2", "x_y-z", &"a".repeat(64)] {
            assert_eq!(Alias::parse(ok).expect("valid").as_str(), ok);
        }
        assert_eq!(
            Alias::parse("  finance\t").expect("trimmed").as_str(),
            "finance"
        );
        assert_eq!(Alias::try_from("ops").expect("valid").to_string(), "ops");
    }

    #[test]
    fn refuses_invalid_aliases() {
        assert_eq!(Alias::parse(""), Err(AliasError::Empty));
        assert_eq!(Alias::parse("   "), Err(AliasError::Empty));
        assert_eq!(Alias::parse(&"a".repeat(65)), Err(AliasError::TooLong));
        for bad in [
            "Finance", "FINANCE", "-lead", "_lead", "a b", "a.b", "a@b", "é", "a/b", "a\nb",
        ] {
            assert_eq!(Alias::parse(bad), Err(AliasError::Pattern), "{bad:?}");
        }
    }

    #[test]
    fn serializes_as_a_plain_string() {
        let alias = Alias::parse("finance").expect("valid");
        assert_eq!(
            serde_json::to_string(&alias).expect("serializes"),
            "\"finance\""
        );
    }

    fn alias_strings() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-zA-Z0-9_ .@-]{0,70}",
            "[a-z0-9][a-z0-9_-]{0,70}",
            "\\PC{0,70}",
        ]
    }

    proptest! {
        #[test]
        fn parse_agrees_with_the_published_pattern(s in alias_strings()) {
            let pattern = regex::Regex::new(ALIAS_PATTERN).expect("pattern compiles");
            let trimmed = s.trim();
            let expected = trimmed.chars().count() <= ALIAS_MAX_LEN && pattern.is_match(trimmed);
            prop_assert_eq!(Alias::parse(&s).is_ok(), expected);
        }

        #[test]
        fn valid_aliases_round_trip(s in "[a-z0-9][a-z0-9_-]{0,63}") {
            let alias = Alias::parse(&s).expect("matches the pattern");
            prop_assert_eq!(alias.as_str(), s.as_str());
            prop_assert_eq!(Alias::parse(alias.as_str()).expect("round trip"), alias);
        }
    }
}
