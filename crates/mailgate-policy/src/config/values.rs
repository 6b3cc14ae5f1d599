//! How a variable's value is read: strict booleans, durations as an operator writes them, and
//! path values that must be absolute and free of control characters.
//!
//! Invariant: each parser refuses what it does not recognise rather than guess (a misspelled
//! `false` must not count as unset, a relative path must not resolve against whatever the
//! current directory happens to be), and a refusal names the variable, never the value.
//!
//! Who calls it: the rest of `config`, `gates` ([`parse_bool`]) and the index commands
//! ([`parse_seconds`]).

use std::path::PathBuf;

use super::ConfigError;

/// Strict boolean: trimmed and lower-cased, `true/1/yes/on` or `false/0/no/off`; absent or blank
/// is `Ok(None)` ("not set"); anything else is an error naming `var` (never the value).
pub(crate) fn parse_bool(
    var: &'static str,
    value: Option<&str>,
) -> Result<Option<bool>, ConfigError> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(Some(true)),
        "false" | "0" | "no" | "off" => Ok(Some(false)),
        _ => Err(ConfigError::NotBoolean { var }),
    }
}

/// A duration as an operator writes one: whole seconds, or a number with `s`, `m` or `h`
/// (`900`, `90s`, `15m`, `2h`), surrounding spaces ignored; `None` for anything else.
pub fn parse_seconds(raw: &str) -> Option<u64> {
    let raw = raw.trim();
    let (digits, unit) = match raw.char_indices().last() {
        Some((i, 's')) => (&raw[..i], 1),
        Some((i, 'm')) => (&raw[..i], 60),
        Some((i, 'h')) => (&raw[..i], 3600),
        _ => (raw, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .filter(|_| digits.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.checked_mul(unit))
}

pub(super) fn reject_control_chars(value: &str, var: &'static str) -> Result<(), ConfigError> {
    if value.chars().any(char::is_control) {
        Err(ConfigError::BadPathVar { var })
    } else {
        Ok(())
    }
}

pub(super) fn absolute_var(value: &str, var: &'static str) -> Result<PathBuf, ConfigError> {
    reject_control_chars(value, var)?;
    let path = PathBuf::from(value);
    if path.is_absolute() {
        Ok(path)
    } else {
        Err(ConfigError::NotAbsolute { var })
    }
}
