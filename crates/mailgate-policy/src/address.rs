//! Email addresses and DNS domains as validated newtypes ("parse, don't validate").
//!
//! Invariants:
//! - [`EmailAddress`] is a bare RFC 5322 `addr-spec` (`local@domain`), checked by the
//!   `email_address` parser, ASCII only, stored lower-cased. It contains no display name, no angle
//!   brackets, no quoted local part, no whitespace or control characters (so no CR/LF/NUL), none
//!   of the URL metacharacters `/ ? # %`, and no IP literal. Its domain is a valid [`Domain`].
//!   Addresses end up in Graph URL path segments and SMTP envelopes, so anything that could
//!   change the meaning of a URL or a header line is refused rather than escaped.
//! - Its local part is a dot-atom over an allowlist, [`is_local_part_byte`]: `a-z A-Z 0-9` and
//!   `. + - _ '`. Every other `atext` character is refused because some deployed mail software
//!   reads it as routing or delivery syntax (`!` UUCP bang paths, `%` the percent hack, `=` SRS,
//!   BATV and VERP addresses that encode another address, `/` and `|` file and pipe delivery,
//!   `&` qmail forwarding), so an address whose domain is allowed could still be relayed
//!   elsewhere by the MTA. Quoted strings and backslash escapes, inside which `@ , : ! %` would
//!   be legal, and source routes (`@a,@b:x@y`) never parse. An allowlist rather than a list of
//!   known routing characters: a character nobody's mailbox needs is refused before anyone
//!   finds a meaning for it.
//! - [`Domain`] is a lower-case ASCII DNS name of at least two labels, each 1–63 characters of
//!   `[a-z0-9-]` that neither starts nor ends with `-`, at most 253 characters in total, without
//!   a trailing dot, and with a top-level label that is not all digits (so no IPv4 literal).
//!
//! Who may call it: anyone. Errors never echo the input: addresses are personal data and
//! allowlists are configuration, neither belongs in a message a tool caller may see.

use std::fmt;

/// Longest address accepted (RFC 5321 path limit minus the angle brackets).
const ADDRESS_MAX_LEN: usize = 254;
/// Longest domain name accepted (RFC 1035, without the trailing dot).
const DOMAIN_MAX_LEN: usize = 253;
/// Longest DNS label accepted (RFC 1035).
const LABEL_MAX_LEN: usize = 63;

/// Why a string is not an acceptable address or domain. Messages never contain the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("address must not be empty")]
    Empty,
    #[error("address is too long")]
    TooLong,
    #[error("address must be ASCII")]
    NotAscii,
    #[error("address contains a forbidden character (whitespace, control, <>, quotes, / ? # %)")]
    ForbiddenCharacter,
    #[error(
        "the local part may hold only letters, digits and . + - _ ' (no routing syntax such as \
         ! % = / |)"
    )]
    LocalPart,
    #[error("address is not a valid bare addr-spec (local@domain)")]
    Syntax,
    #[error("domain must not be empty")]
    EmptyDomain,
    #[error("domain is not a valid DNS name (at least two labels of a-z, 0-9 and '-')")]
    InvalidDomain,
}

/// A validated, lower-cased email address (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct EmailAddress(String);

impl EmailAddress {
    /// Parses a bare address. Surrounding whitespace is refused, not trimmed: callers that read
    /// comma lists trim each entry themselves.
    pub fn parse(s: &str) -> Result<Self, AddressError> {
        if s.is_empty() {
            return Err(AddressError::Empty);
        }
        if s.len() > ADDRESS_MAX_LEN {
            return Err(AddressError::TooLong);
        }
        if !s.is_ascii() {
            return Err(AddressError::NotAscii);
        }
        if s.chars().any(is_forbidden_in_address) {
            return Err(AddressError::ForbiddenCharacter);
        }
        // With quotes refused above, a second '@' can only be a syntax error; checking it here
        // keeps `domain()` (after the last '@') and the parser's split in agreement.
        let Some((local, domain)) = s.split_once('@') else {
            return Err(AddressError::Syntax);
        };
        if domain.contains('@') {
            return Err(AddressError::Syntax);
        }
        // The domain check alone would let the MTA route by the local part (issue 8, finding 11:
        // `evil.example!x@corp.example` passed as `corp.example`).
        if !local.bytes().all(is_local_part_byte) {
            return Err(AddressError::LocalPart);
        }
        let options = email_address::Options::default()
            .without_display_text()
            .without_domain_literal();
        email_address::EmailAddress::parse_with_options(s, options)
            .map_err(|_| AddressError::Syntax)?;
        Domain::parse_bare(domain)?;
        Ok(EmailAddress(s.to_ascii_lowercase()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The exact part after the `@`, lower-cased.
    pub(crate) fn domain(&self) -> &str {
        // The invariant guarantees exactly one '@'; the fallback is unreachable but harmless.
        self.0.rsplit_once('@').map_or("", |(_, domain)| domain)
    }

    /// The domain as a [`Domain`]; no re-validation needed, the address invariant covers it.
    pub(crate) fn to_domain(&self) -> Domain {
        Domain(self.domain().to_owned())
    }
}

impl TryFrom<&str> for EmailAddress {
    type Error = AddressError;

    fn try_from(s: &str) -> Result<Self, Self::Error> {
        EmailAddress::parse(s)
    }
}

/// Characters refused anywhere in an address, on top of what RFC 5322 `dot-atom` excludes.
/// `/ ? # %` are legal `atext` but would let an address steer a URL it is pasted into.
fn is_forbidden_in_address(c: char) -> bool {
    c.is_ascii_whitespace()
        || c.is_ascii_control()
        || matches!(
            c,
            '<' | '>' | '"' | '\\' | '/' | '?' | '#' | '%' | '[' | ']' | '(' | ')'
        )
}

/// The bytes a local part may hold (see the module doc for why each other `atext` character is
/// refused). The dots' placement (not first, not last, not doubled) is the parser's check.
pub(crate) fn is_local_part_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-' | b'_' | b'\'')
}

/// A validated, lower-cased DNS domain name (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct Domain(String);

impl Domain {
    /// Parses a domain: strips one leading `@` (so `@example.com` works in allowlists),
    /// lower-cases, and checks strict DNS label syntax. No trimming, no trailing dot.
    pub(crate) fn parse(s: &str) -> Result<Self, AddressError> {
        Domain::parse_bare(s.strip_prefix('@').unwrap_or(s))
    }

    fn parse_bare(s: &str) -> Result<Self, AddressError> {
        if s.is_empty() {
            return Err(AddressError::EmptyDomain);
        }
        if s.len() > DOMAIN_MAX_LEN || !s.is_ascii() {
            return Err(AddressError::InvalidDomain);
        }
        let lower = s.to_ascii_lowercase();
        let labels: Vec<&str> = lower.split('.').collect();
        if labels.len() < 2 || !labels.iter().all(|label| is_dns_label(label)) {
            return Err(AddressError::InvalidDomain);
        }
        let all_digit_tld = labels
            .last()
            .is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit()));
        if all_digit_tld {
            return Err(AddressError::InvalidDomain);
        }
        Ok(Domain(lower))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for Domain {
    type Error = AddressError;

    fn try_from(s: &str) -> Result<Self, Self::Error> {
        Domain::parse(s)
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One lower-case DNS label: 1–63 of `[a-z0-9-]`, not starting or ending with `-`.
fn is_dns_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= LABEL_MAX_LEN
        && !label.starts_with('-')
        && !label.ends_with('-')
        && label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_lowercases_addresses() {
        let a = EmailAddress::parse("Alice.Smith+Tag@Example.COM").expect("valid");
        assert_eq!(a.as_str(), "alice.smith+tag@example.com");
        assert_eq!(a.domain(), "example.com");
        assert_eq!(a.to_domain(), Domain::parse("example.com").expect("valid"));
        assert_eq!(
            a,
            EmailAddress::parse("alice.smith+tag@example.com").expect("valid")
        );
        for ok in [
            "a@b.example.org",
            "o'brien@example.net",
            "x_y-z@mail-1.example.com",
        ] {
            assert!(EmailAddress::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn refuses_everything_but_a_bare_addr_spec() {
        let cases = [
            ("", AddressError::Empty),
            ("a@b.c/../../users/victim", AddressError::ForbiddenCharacter),
            ("a@example.com/x", AddressError::ForbiddenCharacter),
            ("a@example.com?$select=1", AddressError::ForbiddenCharacter),
            ("<a@example.com>", AddressError::ForbiddenCharacter),
            ("a@example.com#frag", AddressError::ForbiddenCharacter),
            ("Alice <a@example.com>", AddressError::ForbiddenCharacter),
            (" a@example.com", AddressError::ForbiddenCharacter),
            (
                "a@example.com\r\nBcc: x@example.org",
                AddressError::ForbiddenCharacter,
            ),
            ("a@exa\0mple.com", AddressError::ForbiddenCharacter),
            ("\"a b\"@example.com", AddressError::ForbiddenCharacter),
            ("\"a\"@example.com", AddressError::ForbiddenCharacter),
            ("a%2f@example.com", AddressError::ForbiddenCharacter),
            ("a@[127.0.0.1]", AddressError::ForbiddenCharacter),
            ("a(comment)@example.com", AddressError::ForbiddenCharacter),
            ("jöhn@example.com", AddressError::NotAscii),
            ("a@127.0.0.1", AddressError::InvalidDomain),
            ("a@localhost", AddressError::InvalidDomain),
            ("a@example.com.", AddressError::Syntax),
            ("a@-bad.example.com", AddressError::Syntax),
            ("a@exa_mple.com", AddressError::InvalidDomain),
            ("a@", AddressError::Syntax),
            ("@example.com", AddressError::Syntax),
            ("a.@example.com", AddressError::Syntax),
            ("a..b@example.com", AddressError::Syntax),
            ("a@b@example.com", AddressError::Syntax),
            ("plain", AddressError::Syntax),
        ];
        for (input, expected) in cases {
            assert_eq!(EmailAddress::parse(input), Err(expected), "{input:?}");
        }
        let long = format!("{}@example.com", "a".repeat(250));
        assert_eq!(EmailAddress::parse(&long), Err(AddressError::TooLong));
        let long_local = format!("{}@example.com", "a".repeat(65));
        assert_eq!(EmailAddress::parse(&long_local), Err(AddressError::Syntax));
    }

    // See: issue 8, finding 11 (bang-path recipients passed the domain check).
    #[test]
    fn issue_8_routing_syntax_in_local_parts_is_refused() {
        for routed in [
            "evil.example!x@corp.example",
            "x!evil.example@corp.example",
            "evil.example!evil.example!x@corp.example",
            "srs0=h1=tt=evil.example=x@corp.example",
            "prvs=0123456789=x@corp.example",
            "|sh@corp.example",
            "&x@corp.example",
            "x&y@corp.example",
            "a$b@corp.example",
            "a*b@corp.example",
            "a^b@corp.example",
            "a`b@corp.example",
            "a{b}c@corp.example",
            "a~b@corp.example",
        ] {
            assert_eq!(
                EmailAddress::parse(routed),
                Err(AddressError::LocalPart),
                "{routed:?}"
            );
        }
        // Already refused by the character and syntax rules; listed so the class stays closed.
        for routed in [
            "x%evil.example@corp.example",
            "\"x@evil.example\"@corp.example",
            "\"x!y\"@corp.example",
            "\"x%y\"@corp.example",
            "x\\@evil.example@corp.example",
            "x\\!y@corp.example",
            "@a.example,@b.example:x@corp.example",
            "@evil.example:x@corp.example",
            "x@evil.example@corp.example",
            "x/evil@corp.example",
            "x:y@corp.example",
            "x,y@corp.example",
            "x;y@corp.example",
        ] {
            assert!(EmailAddress::parse(routed).is_err(), "{routed:?}");
        }
        for plain in [
            "ana.lima+invoices@corp.example",
            "o'brien@corp.example",
            "x_y-z@corp.example",
        ] {
            assert!(EmailAddress::parse(plain).is_ok(), "{plain:?}");
        }
    }

    #[test]
    fn error_messages_do_not_echo_input() {
        let secret = "victim.person@example.com/../x";
        let message = EmailAddress::parse(secret)
            .expect_err("invalid")
            .to_string();
        assert!(!message.contains("victim"), "{message}");
    }

    #[test]
    fn parses_domains() {
        assert_eq!(
            Domain::parse("Example.COM").expect("valid").as_str(),
            "example.com"
        );
        assert_eq!(
            Domain::parse("@example.org").expect("valid").as_str(),
            "example.org"
        );
        assert_eq!(
            Domain::parse("xn--bcher-kva.example")
                .expect("valid")
                .to_string(),
            "xn--bcher-kva.example"
        );
        assert_eq!(
            Domain::try_from("a-b.example.net").expect("valid").as_str(),
            "a-b.example.net"
        );
        let max_label = format!("{}.example.com", "a".repeat(63));
        assert!(Domain::parse(&max_label).is_ok());
    }

    #[test]
    fn refuses_bad_domains() {
        for bad in [
            "example",
            "http://example.com",
            "user@example.com",
            "@@example.com",
            "-bad.com",
            "bad-.com",
            "not a domain",
            "example.com.",
            ".example.com",
            "exa..mple.com",
            "exa_mple.com",
            "bücher.example",
            "192.168.0.1",
            " example.com",
            "example.com\n",
        ] {
            assert!(Domain::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(Domain::parse(""), Err(AddressError::EmptyDomain));
        assert_eq!(Domain::parse("@"), Err(AddressError::EmptyDomain));
        let long_label = format!("{}.example.com", "a".repeat(64));
        assert_eq!(Domain::parse(&long_label), Err(AddressError::InvalidDomain));
        let long = format!("{}.com", ["abcdefghi"; 26].join("."));
        assert!(long.len() > 253);
        assert_eq!(Domain::parse(&long), Err(AddressError::InvalidDomain));
    }

    proptest! {
        #[test]
        fn accepted_addresses_satisfy_the_invariant(s in "[a-zA-Z0-9.+_'/?#%<> @!=|&*$^`{}~:,;\"\\\\-]{1,40}@[a-zA-Z0-9.\\[\\]-]{1,30}") {
            if let Ok(address) = EmailAddress::parse(&s) {
                let text = address.as_str();
                prop_assert_eq!(text, s.to_ascii_lowercase());
                prop_assert_eq!(text.matches('@').count(), 1);
                prop_assert!(!text.chars().any(is_forbidden_in_address));
                let local = text.split_once('@').map_or("", |(local, _)| local);
                prop_assert!(local.bytes().all(is_local_part_byte), "{}", local);
                prop_assert!(Domain::parse(address.domain()).is_ok());
                prop_assert_eq!(EmailAddress::parse(text), Ok(address.clone()));
                prop_assert_eq!(EmailAddress::parse(&s.to_ascii_uppercase()), Ok(address));
            }
        }

        /// Any local part holding a character outside the allowlist (every routing, quoting
        /// and escape character among them), anywhere, in any allowed domain, is refused.
        #[test]
        fn a_local_part_with_routing_syntax_is_never_accepted(
            before in "[a-zA-Z0-9._+'-]{0,12}",
            routing in prop::sample::select(vec![
                "!", "%", "@", ":", ",", ";", "=", "/", "|", "&", "\"", "\\", "\\@", "\"@\"",
                "<", ">", "(", ")", "[", "]", "#", "?", "$", "*", "^", "`", "{", "}", "~",
                "evil.example!", "%evil.example", "@evil.example:", "@a.example,@b.example:",
            ]),
            after in "[a-zA-Z0-9._+'-]{0,12}",
            domain in prop::sample::select(vec!["corp.example", "example.com", "b.example.org"]),
        ) {
            let raw = format!("{before}{routing}{after}@{domain}");
            prop_assert!(EmailAddress::parse(&raw).is_err(), "{:?} was accepted", raw);
            let quoted = format!("\"{before}{routing}{after}\"@{domain}");
            prop_assert!(EmailAddress::parse(&quoted).is_err(), "{:?} was accepted", quoted);
        }

        #[test]
        fn simple_addresses_are_accepted(local in "[a-z0-9]{1,20}([._+-][a-z0-9]{1,10}){0,3}",
                                         domain in "[a-z0-9]{1,10}(-[a-z0-9]{1,5})?(\\.[a-z]{2,8}){1,3}") {
            let input = format!("{local}@{domain}");
            let address = EmailAddress::parse(&input).expect("well-formed address");
            prop_assert_eq!(address.domain(), domain.as_str());
            prop_assert_eq!(address.as_str(), input.as_str());
        }

        #[test]
        fn domains_compare_case_insensitively(d in "[a-z0-9]{1,10}(\\.[a-z]{2,8}){1,3}") {
            let lower = Domain::parse(&d).expect("well-formed domain");
            prop_assert_eq!(Domain::parse(&d.to_ascii_uppercase()).expect("upper"), lower.clone());
            prop_assert_eq!(Domain::parse(&format!("@{d}")).expect("with @"), lower);
        }
    }
}
