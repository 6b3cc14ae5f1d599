//! Fuzz entry point `config_parse`: `plugin.json` bytes → `Config::from_json`, with its
//! oracles. Compiled only under `cfg(fuzzing)`.

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::Path;

use serde_json::Value;

use crate::config::{
    Access, BackendSpec, Config, OAuthProvider, OAuthSpec, SaslMechanism, Security, ServerSpec,
};

// ----------------------------------------------------------------------------------------------
// config_parse
// ----------------------------------------------------------------------------------------------

/// The base directory relative config paths resolve against; it never exists, so nothing can be
/// read through it.
pub(super) const CONFIG_BASE: &str = "/nonexistent-base";

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// The published limit table (catalog.md "Limits"): key, min, max, default. Restated here on
/// purpose instead of reusing `config`'s macro, so a drift in either place is a finding.
const LIMITS: &[(&str, u64, u64, u64)] = &[
    ("maxConcurrentMailboxes", 1, 8, 3),
    ("maxMailboxesPerSearch", 1, 32, 8),
    ("maxResultsPerMailbox", 1, 100, 20),
    ("maxBodyChars", 1, 12_000, 12_000),
    ("maxAttachmentInputBytes", KIB, 50 * MIB, 15 * MIB),
    ("maxExtractedChars", 1_000, 1_000_000, 200_000),
    ("maxRawAttachmentBytes", KIB, MIB, 256 * KIB),
    ("maxConcurrentExtractions", 1, 8, 2),
    ("maxBatchSize", 1, 100, 25),
    ("maxDownloadBatchBytes", KIB, 500 * MIB, 50 * MIB),
    ("maxDownloadFolderBytes", KIB, 1024 * GIB, GIB),
    ("maxHandoffAttachmentBytes", KIB, 100 * MIB, 25 * MIB),
    ("maxHandoffStoreBytes", KIB, 5 * GIB, 500 * MIB),
    ("maxHandoffStoreEntries", 1, 10_000, 1_000),
    ("maxQueriesPerBatch", 1, 25, 10),
    ("maxBatchResultMessages", 1, 5_000, 500),
    ("maxBatchResultBytes", KIB, 10 * MIB, 2 * MIB),
    ("maxBatchContextChars", 1_000, 5_000_000, 500_000),
    ("maxBatchAttachments", 1, 10_000, 1_000),
    ("maxZipEntries", 1, 1_000, 200),
    ("maxZipUncompressedBytes", KIB, 200 * MIB, 50 * MIB),
    ("maxContainerEntries", 1, 20_000, 1_000),
    ("maxContainerUncompressedBytes", KIB, 500 * MIB, 100 * MIB),
];

/// Top-level keys besides the limits that `plugin.json` may contain (config.md).
const OTHER_TOP_KEYS: &[&str] = &["mailboxes", "allowWrites", "searchMemoryPath", "principals"];

/// Bounds of `rateLimit.imapPerMinute` and `rateLimit.smtpPerHour` (config.md).
const IMAP_PER_MINUTE: (u32, u32) = (1, 6_000);
const SMTP_PER_HOUR: (u32, u32) = (1, 10_000);

/// Values shorter than this are not checked for echoes in error messages: short strings
/// ("a", "tls", "read") occur in rule texts by coincidence.
const ECHO_MIN_LEN: usize = 12;

/// Fuzzes [`Config::from_json`] with arbitrary bytes as `plugin.json`.
///
/// Oracles:
/// - determinism: parsing the same bytes twice gives the same result (compared via `Debug`);
/// - a refusal is one line without control characters and echoes no string value of the input;
/// - an accepted config satisfies every documented invariant: at least one mailbox, unique
///   aliases matching `^[a-z0-9][a-z0-9_-]*$` (at most 64 characters), unique lower-cased
///   addresses, every limit within its published bounds, `maxHandoffStoreBytes >=
///   maxHandoffAttachmentBytes`, `maxDownloadFolderBytes >= maxDownloadBatchBytes`, `plain`
///   transport only to loopback hosts, rate limits in bounds; an `auth` block only on a graph or
///   imap backend, with its rules met (client id charset, tenant form, issuer scheme and
///   loopback rule, scopes only for oidc, mechanism only for imap) and no password or token
///   variable on that backend's server blocks;
/// - an accepted config is exactly what the file says: the input is a JSON object with only known
///   top-level keys (in particular no `allowSend`), and aliases, addresses, access, backends,
///   `allowWrites` and every limit (or its default) match the input values.
pub fn config_parse(data: &[u8]) {
    let base = Path::new(CONFIG_BASE);
    let first = Config::from_json(data, base);
    let second = Config::from_json(data, base);
    assert_eq!(
        format!("{first:?}"),
        format!("{second:?}"),
        "oracle: Config::from_json is deterministic"
    );
    match first {
        Ok(config) => check_accepted_config(data, &config),
        Err(error) => check_refusal_message(data, &error.to_string()),
    }
}

fn check_refusal_message(data: &[u8], message: &str) {
    assert!(
        !message.chars().any(char::is_control),
        "oracle: a config error is one line without control characters: {message:?}"
    );
    let Ok(tree) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let mut keys = Vec::new();
    let mut values = Vec::new();
    collect_strings(&tree, &mut keys, &mut values);
    let checked = without_schema_lists(message);
    for value in values {
        if echo_checkable(&value, &keys) && checked.contains(value.as_str()) {
            // The value may merely spell the message's own fixed text (a fuzzer finds
            // "the config file is invalid: ..." as an address). An echo follows the value: change
            // every letter and digit of it and the new refusal must not contain the new value.
            let probe = shifted(&value);
            let Ok(bytes) = serde_json::to_vec(&replace_string(&tree, &value, &probe)) else {
                continue;
            };
            if let Err(error) = Config::from_json(&bytes, Path::new(CONFIG_BASE)) {
                let again = error.to_string();
                assert!(
                    !without_schema_lists(&again).contains(probe.as_str()),
                    "oracle: a config error never echoes a value: {message:?} / {again:?}"
                );
            }
        }
    }
}

/// `value` with every ASCII letter and digit moved one place on (z→a, 9→0).
fn shifted(value: &str) -> String {
    value
        .chars()
        .map(|c| match c {
            'z' => 'a',
            'Z' => 'A',
            '9' => '0',
            c if c.is_ascii_alphanumeric() => char::from(c as u8 + 1),
            c => c,
        })
        .collect()
}

/// `tree` with every string equal to `from` replaced by `to`.
fn replace_string(tree: &Value, from: &str, to: &str) -> Value {
    match tree {
        Value::String(s) if s == from => Value::String(to.to_owned()),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| replace_string(item, from, to))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| (key.clone(), replace_string(item, from, to)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Whether a string value can be told apart from what a refusal may legitimately contain: JSON
/// path steps (input keys, `[n]`, dots), the schema's own key and variant names (listed in
/// "allowed: ..." and "must be one of: ...", removed by [`without_schema_lists`]) and the fixed
/// English rule texts. A value qualifies when it is long, is no part of an input key, and has a
/// character that a path step or a plain name cannot have (an address's `@`, for example).
fn echo_checkable(value: &str, keys: &[String]) -> bool {
    value.chars().count() >= ECHO_MIN_LEN
        && value
            .chars()
            .any(|c| !(c.is_ascii_alphanumeric() || matches!(c, ' ' | '_' | '.' | '-' | '[' | ']')))
        && !keys.iter().any(|key| key.contains(value))
}

/// The message without the lists of schema names a refusal may quote.
fn without_schema_lists(message: &str) -> String {
    let mut out = message.to_owned();
    for marker in ["(allowed: ", "must be one of: "] {
        if let Some(start) = out.find(marker) {
            let end = out[start..]
                .find(')')
                .map_or(out.len(), |end| start + end + 1);
            out.replace_range(start..end, "");
        }
    }
    out
}

fn collect_strings(value: &Value, keys: &mut Vec<String>, values: &mut Vec<String>) {
    match value {
        Value::String(s) => values.push(s.clone()),
        Value::Array(items) => items
            .iter()
            .for_each(|item| collect_strings(item, keys, values)),
        Value::Object(map) => {
            for (key, item) in map {
                keys.push(key.clone());
                collect_strings(item, keys, values);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Principals (issue 29): every grant names an allowlisted alias once, at no wider access than
/// the alias's own; labels and identities are unique; the file's count and order are kept.
fn check_principals(tree: &Value, config: &Config) {
    let listed = tree
        .get("principals")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    assert_eq!(
        config.principals.len(),
        listed,
        "oracle: every principal of the file is kept"
    );
    let mut labels = HashSet::new();
    let mut identities = HashSet::new();
    for principal in &config.principals {
        assert!(
            labels.insert(principal.label.as_str().to_owned()),
            "oracle: principal labels are unique"
        );
        assert!(
            identities.insert(format!("{:?}", principal.identity)),
            "oracle: principal identities are unique"
        );
        assert!(
            !principal.grants.is_empty(),
            "oracle: a principal grants something"
        );
        let mut aliases = HashSet::new();
        for grant in &principal.grants {
            let entry = config
                .mailbox(&grant.alias)
                .expect("oracle: a grant names an allowlisted alias");
            assert!(
                aliases.insert(grant.alias.clone()),
                "oracle: a principal lists an alias once"
            );
            assert!(
                !(grant.access == Access::Full && entry.access == Access::Read),
                "oracle: no grant is wider than its alias"
            );
        }
    }
}

fn check_accepted_config(data: &[u8], config: &Config) {
    // The strict reader accepted it, so the lenient one must too.
    let tree: Value =
        serde_json::from_slice(data).expect("oracle: an accepted config is valid JSON");
    let top = tree
        .as_object()
        .expect("oracle: an accepted config is a JSON object");
    check_principals(&tree, config);
    assert!(
        !top.contains_key("allowSend"),
        "oracle: no accepted config has an allowSend key"
    );
    for key in top.keys() {
        assert!(
            OTHER_TOP_KEYS.contains(&key.as_str()) || LIMITS.iter().any(|(k, ..)| k == key),
            "oracle: an accepted config has only known top-level keys ({key:?})"
        );
    }
    assert_eq!(
        config.allow_writes,
        top.get("allowWrites")
            .map(|v| v.as_bool().expect("oracle: allowWrites is a boolean"))
            .unwrap_or(false),
        "oracle: allowWrites is the file's value (default false)"
    );
    check_limits(top, config);
    check_mailboxes(top, config);
    if let Some(path) = &config.search_memory_path {
        assert!(
            path.is_absolute(),
            "oracle: searchMemoryPath is resolved to an absolute path"
        );
    }
}

fn check_limits(top: &serde_json::Map<String, Value>, config: &Config) {
    let limits =
        serde_json::to_value(&config.limits).expect("oracle: the limits serialize to JSON");
    let limits = limits
        .as_object()
        .expect("oracle: the limits are an object");
    assert_eq!(
        limits.len(),
        LIMITS.len(),
        "oracle: the published limit table lists every limit"
    );
    for &(key, min, max, default) in LIMITS {
        let value = limits
            .get(key)
            .and_then(Value::as_u64)
            .unwrap_or_else(|| panic!("oracle: limit {key} is present and an integer"));
        assert!(
            (min..=max).contains(&value),
            "oracle: limit {key} = {value} is within {min}..={max}"
        );
        let expected = top.get(key).map_or(Some(default), Value::as_u64);
        assert_eq!(
            Some(value),
            expected,
            "oracle: limit {key} is the file's value or the default"
        );
    }
    assert!(
        config.limits.max_handoff_store_bytes >= config.limits.max_handoff_attachment_bytes,
        "oracle: maxHandoffStoreBytes >= maxHandoffAttachmentBytes"
    );
    assert!(
        config.limits.max_download_folder_bytes >= config.limits.max_download_batch_bytes,
        "oracle: maxDownloadFolderBytes >= maxDownloadBatchBytes"
    );
}

fn check_mailboxes(top: &serde_json::Map<String, Value>, config: &Config) {
    let raw = top
        .get("mailboxes")
        .and_then(Value::as_array)
        .expect("oracle: an accepted config has a mailboxes array");
    assert!(
        !config.mailboxes.is_empty(),
        "oracle: an accepted config has at least one mailbox"
    );
    assert_eq!(
        raw.len(),
        config.mailboxes.len(),
        "oracle: every mailboxes[] entry is kept"
    );
    let alias_pattern = regex::Regex::new(r"^[a-z0-9][a-z0-9_-]*$")
        .expect("invariant: the alias pattern is a valid regex");
    let mut aliases = HashSet::new();
    let mut addresses = HashSet::new();
    for (entry, raw) in config.mailboxes.iter().zip(raw) {
        let alias = entry.alias.as_str();
        assert!(
            alias_pattern.is_match(alias) && alias.len() <= 64,
            "oracle: alias {alias:?} matches the alias pattern and is at most 64 characters"
        );
        assert!(
            aliases.insert(alias.to_owned()),
            "oracle: aliases are unique"
        );
        let address = entry.address.as_str();
        assert!(
            addresses.insert(address.to_ascii_lowercase()),
            "oracle: addresses are unique, compared case-insensitively"
        );
        assert_eq!(
            address,
            address.to_ascii_lowercase(),
            "oracle: addresses are stored lower-cased"
        );
        assert_eq!(
            Some(alias),
            raw.get("alias").and_then(Value::as_str),
            "oracle: the alias is the file's value, unchanged"
        );
        assert_eq!(
            Some(address.to_owned()),
            raw.get("address")
                .and_then(Value::as_str)
                .map(str::to_ascii_lowercase),
            "oracle: the address is the file's value, lower-cased"
        );
        let read = raw.get("access").and_then(Value::as_str) == Some("read");
        assert_eq!(
            entry.access == Access::Read,
            read,
            "oracle: access is read exactly when the file says read"
        );
        check_backend(&entry.backend, raw.get("backend"));
    }
}

fn check_backend(backend: &BackendSpec, raw: Option<&Value>) {
    let kind = raw.and_then(|b| b.get("kind")).and_then(Value::as_str);
    let raw_auth = raw.and_then(|b| b.get("auth"));
    match backend {
        BackendSpec::Graph { auth } => {
            assert!(
                matches!(kind, None | Some("graph")),
                "oracle: a graph backend comes from kind graph or no backend"
            );
            check_auth(auth.as_ref(), raw_auth, false);
        }
        BackendSpec::Imap { imap, smtp, auth } => {
            assert_eq!(kind, Some("imap"), "oracle: an imap backend has kind imap");
            check_server(imap, raw.and_then(|b| b.get("imap")), true);
            check_optional_server(smtp.as_ref(), raw.and_then(|b| b.get("smtp")));
            check_auth(auth.as_ref(), raw_auth, true);
            if auth.is_some() {
                for server in [Some(imap), smtp.as_ref()].into_iter().flatten() {
                    assert!(
                        server.password_env.is_none() && server.oauth2_token_env.is_none(),
                        "oracle: with auth, no server block names a password or token variable"
                    );
                }
            }
        }
        BackendSpec::Maildir { path, smtp } => {
            assert_eq!(
                kind,
                Some("maildir"),
                "oracle: a maildir backend has kind maildir"
            );
            let file_path = raw
                .and_then(|b| b.get("path"))
                .and_then(Value::as_str)
                .expect("oracle: a maildir backend has a path");
            assert_eq!(
                path,
                &Path::new(CONFIG_BASE).join(file_path),
                "oracle: a maildir path is the file's, resolved against the config directory"
            );
            check_optional_server(smtp.as_ref(), raw.and_then(|b| b.get("smtp")));
            assert!(
                raw_auth.is_none(),
                "oracle: a maildir backend has no auth block"
            );
        }
    }
}

/// Issue 37: an accepted `auth` block is the file's and meets its rules (cheap checks only).
fn check_auth(spec: Option<&OAuthSpec>, raw: Option<&Value>, imap: bool) {
    assert_eq!(
        spec.is_some(),
        raw.is_some(),
        "oracle: an auth spec is kept exactly when the backend has an auth block"
    );
    let (Some(spec), Some(raw)) = (spec, raw) else {
        return;
    };
    let text = |key: &str| raw.get(key).and_then(Value::as_str);
    let id = spec.client_id();
    assert!(
        !id.is_empty()
            && id.len() <= 200
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-')),
        "oracle: a client id is 1-200 of [A-Za-z0-9._~-]"
    );
    assert_eq!(
        Some(id),
        text("clientId"),
        "oracle: the client id is the file's"
    );
    assert_eq!(
        Some(spec.provider().name()),
        text("provider"),
        "oracle: the provider is the file's"
    );
    let has = |key: &str| raw.get(key).is_some();
    match spec.provider() {
        OAuthProvider::Microsoft { tenant } => {
            let tenant = tenant.as_str();
            assert_eq!(
                tenant,
                text("tenant").map_or("common".to_owned(), str::to_ascii_lowercase),
                "oracle: the tenant is the file's, lower-cased, or common"
            );
            assert!(
                !tenant.is_empty()
                    && tenant.bytes().all(|b| {
                        b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'
                    }),
                "oracle: a tenant is a name, GUID or domain"
            );
            assert!(
                !has("issuer") && !has("scopes"),
                "oracle: microsoft has no issuer or scopes"
            );
        }
        OAuthProvider::Google => {
            assert!(imap, "oracle: google only on an imap backend");
            assert!(
                !has("tenant") && !has("issuer") && !has("scopes"),
                "oracle: google has no tenant, issuer or scopes"
            );
        }
        OAuthProvider::Oidc { issuer, scopes } => {
            let issuer = issuer.as_str();
            assert_eq!(
                Some(issuer),
                text("issuer"),
                "oracle: the issuer is the file's, exactly"
            );
            assert!(
                !issuer.contains(['?', '#', ' ', '@']),
                "oracle: an issuer has no query, fragment or user info"
            );
            let loopback = |rest: &str| {
                let host = rest.split('/').next().unwrap_or_default();
                let host = if let Some(v6) = host.strip_prefix('[') {
                    v6.split(']').next().unwrap_or_default()
                } else {
                    host.split(':').next().unwrap_or_default()
                };
                host.eq_ignore_ascii_case("localhost")
                    || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
            };
            assert!(
                issuer.starts_with("https://")
                    || issuer.strip_prefix("http://").is_some_and(loopback),
                "oracle: an issuer is https, or http to a loopback host"
            );
            let scopes = scopes.as_slice();
            assert!(
                (1..=16).contains(&scopes.len()),
                "oracle: oidc lists 1 to 16 scopes"
            );
            let mut seen = HashSet::new();
            for scope in scopes {
                assert!(
                    (1..=200).contains(&scope.len())
                        && scope
                            .bytes()
                            .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'\\')),
                    "oracle: a scope is printable ASCII without spaces or quotes"
                );
                assert!(seen.insert(scope.as_str()), "oracle: scopes are distinct");
            }
            assert!(!has("tenant"), "oracle: oidc has no tenant");
        }
    }
    if let Some(var) = spec.client_secret_env() {
        assert!(
            var.len() <= 128
                && var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !var.starts_with(|c: char| c.is_ascii_digit())
                && !var.is_empty(),
            "oracle: clientSecretEnv is a variable name"
        );
    }
    if let Some(address) = spec.delegated_from() {
        assert_eq!(
            Some(address.as_str().to_owned()),
            text("delegatedFrom").map(str::to_ascii_lowercase),
            "oracle: delegatedFrom is the file's address, lower-cased"
        );
    }
    let expected = if text("mechanism") == Some("oauthbearer") {
        SaslMechanism::OAuthBearer
    } else {
        SaslMechanism::XOAuth2
    };
    assert_eq!(
        spec.mechanism(),
        expected,
        "oracle: the mechanism is the file's, or xoauth2"
    );
    assert!(
        imap || !has("mechanism"),
        "oracle: a mechanism only on an imap backend"
    );
}

fn check_optional_server(spec: Option<&ServerSpec>, raw: Option<&Value>) {
    assert_eq!(
        spec.is_some(),
        raw.is_some(),
        "oracle: an smtp block is kept exactly when the file has one"
    );
    if let Some(spec) = spec {
        check_server(spec, raw, false);
    }
}

fn check_server(spec: &ServerSpec, raw: Option<&Value>, imap: bool) {
    let raw = raw.expect("oracle: a server spec comes from a server block");
    assert_eq!(
        Some(spec.host.clone()),
        raw.get("host")
            .and_then(Value::as_str)
            .map(str::to_ascii_lowercase),
        "oracle: the host is the file's value, lower-cased"
    );
    assert!(spec.port >= 1, "oracle: ports are 1-65535");
    assert_eq!(
        Some(u64::from(spec.port)),
        raw.get("port").and_then(Value::as_u64),
        "oracle: the port is the file's value"
    );
    if spec.security == Security::Plain {
        let loopback = spec.host == "localhost"
            || spec.host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
        assert!(loopback, "oracle: plain transport only to a loopback host");
    }
    assert!(
        spec.password_env.is_none() || spec.oauth2_token_env.is_none(),
        "oracle: at most one credential variable per server block"
    );
    if let Some(rate) = spec.rate_limit {
        let in_bounds = |value: Option<u32>, (min, max): (u32, u32)| {
            value.is_none_or(|v| (min..=max).contains(&v))
        };
        assert!(
            in_bounds(rate.imap_per_minute, IMAP_PER_MINUTE)
                && in_bounds(rate.smtp_per_hour, SMTP_PER_HOUR),
            "oracle: rate limits are within their bounds"
        );
        assert!(
            if imap {
                rate.smtp_per_hour.is_none()
            } else {
                rate.imap_per_minute.is_none()
            },
            "oracle: a rate limit only applies to its own server block"
        );
    }
    if let Some(ca) = &spec.ca_file {
        assert!(
            ca.is_absolute(),
            "oracle: caFile is resolved to an absolute path"
        );
    }
}
