//! `RawConfig`: the serde mirror of `plugin.json`, and the strict reader that produces it.
//!
//! Invariant: these types say exactly which keys and JSON types the file may contain
//! (`deny_unknown_fields` everywhere, so `allowSend`, credentials or typos are errors) and
//! nothing else: no defaults beyond "absent", no bounds, no cross-field rules. All of that is
//! decided in `config/mod.rs` (`Config::from_raw`) and the `backend`, `oauth` and `limits`
//! modules it calls, the only consumers of these types.
//!
//! The reader ([`parse`]) is mechanism, not policy. It parses the bytes into a JSON tree while
//! refusing duplicate object keys (which would otherwise be resolved silently, last one wins),
//! then deserializes the tree through a small path-tracking deserializer so that every schema
//! error names its JSON path (`mailboxes[1].alias`) and the rule broken, and never the offending
//! value: serde's own messages quote values, and a misplaced secret must not reach a log.
//!
//! Who may call it: `config/mod.rs`, `config/backend.rs`, `config/oauth.rs`, `config/limits.rs`
//! and `config/principals.rs` only.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::ConfigError;
use crate::json_tree::{self, Nulls, TreeError};

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawConfig {
    pub(crate) mailboxes: Vec<RawMailbox>,
    pub(crate) allow_writes: Option<bool>,
    pub(crate) search_memory_path: Option<String>,
    // Limits (catalog.md "Limits"); bounds are checked in limits.rs.
    pub(crate) max_concurrent_mailboxes: Option<u64>,
    pub(crate) max_mailboxes_per_search: Option<u64>,
    pub(crate) max_results_per_mailbox: Option<u64>,
    pub(crate) max_body_chars: Option<u64>,
    pub(crate) max_attachment_input_bytes: Option<u64>,
    pub(crate) max_extracted_chars: Option<u64>,
    pub(crate) max_raw_attachment_bytes: Option<u64>,
    pub(crate) max_concurrent_extractions: Option<u64>,
    pub(crate) max_batch_size: Option<u64>,
    pub(crate) max_download_batch_bytes: Option<u64>,
    pub(crate) max_download_folder_bytes: Option<u64>,
    pub(crate) max_handoff_attachment_bytes: Option<u64>,
    pub(crate) max_handoff_store_bytes: Option<u64>,
    pub(crate) max_handoff_store_entries: Option<u64>,
    pub(crate) max_queries_per_batch: Option<u64>,
    pub(crate) max_batch_result_messages: Option<u64>,
    pub(crate) max_batch_result_bytes: Option<u64>,
    pub(crate) max_batch_context_chars: Option<u64>,
    pub(crate) max_batch_attachments: Option<u64>,
    pub(crate) max_zip_entries: Option<u64>,
    pub(crate) max_zip_uncompressed_bytes: Option<u64>,
    pub(crate) max_container_entries: Option<u64>,
    pub(crate) max_container_uncompressed_bytes: Option<u64>,
    /// The per-person policy of remote HTTP (principals.rs).
    pub(crate) principals: Option<Vec<RawPrincipal>>,
}

/// One `principals[]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawPrincipal {
    pub(crate) label: String,
    #[serde(rename = "match")]
    pub(crate) matcher: RawMatch,
    pub(crate) aliases: Vec<String>,
    pub(crate) access: Option<RawAccess>,
}

/// `match`: which verified claim makes a token this principal's (exactly one, checked in
/// principals.rs).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMatch {
    pub(crate) sub: Option<String>,
    pub(crate) email: Option<String>,
    pub(crate) group: Option<String>,
}

/// One `mailboxes[]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawMailbox {
    pub(crate) alias: String,
    pub(crate) address: String,
    pub(crate) access: Option<RawAccess>,
    pub(crate) backend: Option<RawBackend>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawAccess {
    Full,
    Read,
}

/// `backend`: a flat object keyed by `kind`. Which other keys each kind allows is a rule, so it
/// is checked in mod.rs (a serde-tagged enum would lose the JSON path of nested errors).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawBackend {
    pub(crate) kind: RawBackendKind,
    pub(crate) path: Option<String>,
    pub(crate) imap: Option<RawServer>,
    pub(crate) smtp: Option<RawServer>,
    /// Delegated OAuth (issue 37): one grant per alias, so on the backend, not on a server block.
    pub(crate) auth: Option<RawAuth>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawBackendKind {
    Graph,
    Imap,
    Maildir,
}

/// An `imap` or `smtp` server block.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawServer {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) security: RawSecurity,
    pub(crate) username: Option<String>,
    pub(crate) password_env: Option<String>,
    pub(crate) oauth2_token_env: Option<String>,
    pub(crate) ca_file: Option<String>,
    pub(crate) rate_limit: Option<RawRateLimit>,
}

/// `backend.auth`: which keys each provider and backend kind allows is a rule, checked in
/// oauth.rs (flat like `backend`, for the same reason).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawAuth {
    pub(crate) kind: RawAuthKind,
    pub(crate) provider: RawOAuthProvider,
    pub(crate) client_id: String,
    pub(crate) tenant: Option<String>,
    pub(crate) issuer: Option<String>,
    pub(crate) scopes: Option<Vec<String>>,
    pub(crate) client_secret_env: Option<String>,
    pub(crate) delegated_from: Option<String>,
    pub(crate) mechanism: Option<RawSaslMechanism>,
}

/// `auth.kind`: only `oauth` today; a tag so that another kind can be added without a new key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawAuthKind {
    Oauth,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawOAuthProvider {
    Microsoft,
    Google,
    Oidc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawSaslMechanism {
    Xoauth2,
    Oauthbearer,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawSecurity {
    Tls,
    Starttls,
    Plain,
}

#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawRateLimit {
    pub(crate) imap_per_minute: Option<u32>,
    pub(crate) smtp_per_hour: Option<u32>,
}

/// Parses `plugin.json` bytes into a [`RawConfig`]: JSON syntax, no duplicate keys, exact key
/// set and JSON types. Errors name a position or a JSON path, never a value.
pub(crate) fn parse(bytes: &[u8]) -> Result<RawConfig, ConfigError> {
    let StrictValue(tree) = serde_json::from_slice(bytes).map_err(|error| {
        let (line, column) = (error.line(), error.column());
        match error.classify() {
            // The only data error `StrictValue` raises is a repeated key.
            serde_json::error::Category::Data => ConfigError::DuplicateKey { line, column },
            _ => ConfigError::Json { line, column },
        }
    })?;
    json_tree::deserialize::<RawConfig, SchemaError>(&tree, Nulls::Refused).map_err(|error| {
        ConfigError::Schema {
            path: error.render_path(),
            rule: error.rule,
        }
    })
}

/// A JSON tree parsed without accepting duplicate object keys.
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // JSON text cannot express NaN or infinity, so `from_f64` always succeeds here.
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom("duplicate object key"));
            }
            let StrictValue(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// One step of a JSON path.
#[derive(Debug)]
enum Segment {
    Key(String),
    Index(usize),
}

/// A schema error: the rule broken plus the path, collected innermost first while unwinding.
#[derive(Debug)]
struct SchemaError {
    rule: String,
    path: Vec<Segment>,
}

impl SchemaError {
    fn new(rule: String) -> Self {
        SchemaError {
            rule,
            path: Vec::new(),
        }
    }

    fn within(mut self, segment: Segment) -> Self {
        self.path.push(segment);
        self
    }

    fn render_path(&self) -> String {
        let mut out = String::new();
        for segment in self.path.iter().rev() {
            match segment {
                Segment::Index(index) => out.push_str(&format!("[{index}]")),
                Segment::Key(key) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(&render_key(key));
                }
            }
        }
        if out.is_empty() {
            out.push_str("(top level)");
        }
        out
    }
}

/// Keys come from the file, so an unknown one could be anything: show plain identifiers as
/// they are and anything else escaped and shortened.
fn render_key(key: &str) -> String {
    let plain = !key.is_empty()
        && key.len() <= 64
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if plain {
        key.to_owned()
    } else {
        let short: String = key.chars().take(32).collect();
        format!("{:?}", short)
    }
}

/// Describes what serde expected, in file terms rather than Rust type names.
fn describe_expected(expected: &dyn de::Expected) -> String {
    let text = expected.to_string();
    match text.as_str() {
        "u16" => "an integer from 0 to 65535".to_owned(),
        "u32" => "an integer from 0 to 4294967295".to_owned(),
        "u64" => "a non-negative integer".to_owned(),
        "a sequence" => "an array".to_owned(),
        _ if text.starts_with("struct ") => "an object".to_owned(),
        _ if text.starts_with("enum ") => "a string".to_owned(),
        _ => text,
    }
}

fn describe_found(unexpected: &de::Unexpected<'_>) -> &'static str {
    match unexpected {
        de::Unexpected::Bool(_) => "a boolean",
        de::Unexpected::Unsigned(_) | de::Unexpected::Signed(_) | de::Unexpected::Float(_) => {
            "a number"
        }
        de::Unexpected::Str(_) | de::Unexpected::Char(_) => "a string",
        de::Unexpected::Unit | de::Unexpected::Option => "null",
        de::Unexpected::Seq => "an array",
        de::Unexpected::Map => "an object",
        _ => "another kind of value",
    }
}

fn list(names: &'static [&'static str]) -> String {
    names.join(", ")
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.render_path(), self.rule)
    }
}

impl std::error::Error for SchemaError {}

impl de::Error for SchemaError {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        // Custom messages may quote input; none of our types raise one, so say less.
        SchemaError::new("is invalid".to_owned())
    }

    fn invalid_type(unexpected: de::Unexpected<'_>, expected: &dyn de::Expected) -> Self {
        SchemaError::new(format!(
            "must be {} (found {})",
            describe_expected(expected),
            describe_found(&unexpected)
        ))
    }

    fn invalid_value(_unexpected: de::Unexpected<'_>, expected: &dyn de::Expected) -> Self {
        SchemaError::new(format!("must be {}", describe_expected(expected)))
    }

    fn invalid_length(_len: usize, expected: &dyn de::Expected) -> Self {
        SchemaError::new(format!("has the wrong length (expected {expected})"))
    }

    fn unknown_variant(_variant: &str, expected: &'static [&'static str]) -> Self {
        SchemaError::new(format!("must be one of: {}", list(expected)))
    }

    fn unknown_field(_field: &str, expected: &'static [&'static str]) -> Self {
        // The key itself is added to the path by `TreeMap::next_key_seed`.
        SchemaError::new(format!("is not a known key (allowed: {})", list(expected)))
    }

    fn missing_field(field: &'static str) -> Self {
        SchemaError::new("is required".to_owned()).within(Segment::Key(field.to_owned()))
    }

    fn duplicate_field(_field: &'static str) -> Self {
        SchemaError::new("appears more than once".to_owned())
    }
}

impl TreeError for SchemaError {
    fn at_key(self, key: &str) -> Self {
        self.within(Segment::Key(key.to_owned()))
    }

    fn at_index(self, index: usize) -> Self {
        self.within(Segment::Index(index))
    }

    fn null_refused() -> Self {
        SchemaError::new("must not be null (leave the key out instead)".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema_error(json: &str) -> (String, String) {
        match parse(json.as_bytes()) {
            Err(ConfigError::Schema { path, rule }) => (path, rule),
            other => panic!("expected a schema error, got {other:?}"),
        }
    }

    const ONE: &str = r#"{"alias":"a","address":"a@example.com"}"#;

    #[test]
    fn parses_a_full_file() {
        let json = r#"{
            "mailboxes": [
                {"alias": "finance", "address": "finance@example.com"},
                {"alias": "support", "address": "support@example.org", "access": "read",
                 "backend": {"kind": "imap",
                    "imap": {"host": "imap.example.org", "port": 993, "security": "tls",
                             "username": "support@example.org", "passwordEnv": "SUPPORT_PW",
                             "caFile": "ca.pem", "rateLimit": {"imapPerMinute": 30}},
                    "smtp": {"host": "smtp.example.org", "port": 465, "security": "tls",
                             "oauth2TokenEnv": "SUPPORT_TOKEN"}}},
                {"alias": "archive", "address": "archive@example.net",
                 "backend": {"kind": "maildir", "path": "/srv/mail/archive"}}
            ],
            "allowWrites": true, "searchMemoryPath": "memory.yaml", "maxBodyChars": 500
        }"#;
        let raw = parse(json.as_bytes()).expect("valid");
        assert_eq!(raw.mailboxes.len(), 3);
        assert_eq!(raw.mailboxes[1].access, Some(RawAccess::Read));
        let backend = raw.mailboxes[1].backend.as_ref().expect("backend");
        assert_eq!(backend.kind, RawBackendKind::Imap);
        let imap = backend.imap.as_ref().expect("imap");
        assert_eq!(imap.security, RawSecurity::Tls);
        assert_eq!(imap.rate_limit.and_then(|r| r.imap_per_minute), Some(30));
        let smtp = backend.smtp.as_ref().expect("smtp");
        assert_eq!(smtp.oauth2_token_env.as_deref(), Some("SUPPORT_TOKEN"));
        assert_eq!(raw.allow_writes, Some(true));
        assert_eq!(raw.max_body_chars, Some(500));
    }

    #[test]
    fn json_errors_report_a_position_only() {
        assert!(matches!(
            parse(b"{\"mailboxes\": [ \"secretvalue\" "),
            Err(ConfigError::Json { line: 1, .. })
        ));
        assert!(matches!(
            parse(b"{} trailing"),
            Err(ConfigError::Json { .. })
        ));
        let error = parse(b"{\"allowWrites\": false,\n \"allowWrites\": true}").expect_err("dup");
        assert!(
            matches!(error, ConfigError::DuplicateKey { line: 2, .. }),
            "{error:?}"
        );
    }

    #[test]
    fn schema_errors_name_the_path_and_rule_but_not_the_value() {
        let (path, rule) = schema_error(&format!(r#"{{"mailboxes":[{ONE}],"allowSend":true}}"#));
        assert_eq!(path, "allowSend");
        assert!(rule.starts_with("is not a known key"), "{rule}");

        let (path, rule) = schema_error(
            r#"{"mailboxes":[{"alias":"a","address":"a@example.com"},{"alias":7,"address":"x"}]}"#,
        );
        assert_eq!(path, "mailboxes[1].alias");
        assert_eq!(rule, "must be a string (found a number)");

        let (path, rule) = schema_error(r#"{"mailboxes":[{"alias":"a"}]}"#);
        assert_eq!(
            (path.as_str(), rule.as_str()),
            ("mailboxes[0].address", "is required")
        );

        let (path, rule) = schema_error(
            r#"{"mailboxes":[{"alias":"a","address":"a@example.com","access":"hunter2"}]}"#,
        );
        assert_eq!(path, "mailboxes[0].access");
        assert_eq!(rule, "must be one of: full, read");

        let (path, rule) = schema_error(
            r#"{"mailboxes":[{"alias":"a","address":"a@example.com","backend":{"kind":"imap",
                "imap":{"host":"h","port":70000,"security":"tls","password":"hunter2"}}}]}"#,
        );
        assert_eq!(path, "mailboxes[0].backend.imap.password");
        assert!(rule.contains("passwordEnv"), "{rule}");
        assert!(!rule.contains("hunter2"));

        let (path, rule) = schema_error(
            r#"{"mailboxes":[{"alias":"a","address":"a@example.com","backend":{"kind":"imap",
                "imap":{"host":"h","port":70000,"security":"tls"}}}]}"#,
        );
        assert_eq!(path, "mailboxes[0].backend.imap.port");
        assert_eq!(rule, "must be an integer from 0 to 65535");

        let (path, _) = schema_error(r#"{"mailboxes":[], "maxBatchSize": -1}"#);
        assert_eq!(path, "maxBatchSize");
        let (path, _) = schema_error(r#"{"mailboxes":[], "maxBatchSize": 2.5}"#);
        assert_eq!(path, "maxBatchSize");
        let (path, rule) = schema_error(r#"{"mailboxes":[], "allowWrites": null}"#);
        assert_eq!(path, "allowWrites");
        assert!(rule.contains("null"), "{rule}");
        let (path, _) = schema_error(r#"{"mailboxes":[], "allowWrites": "true"}"#);
        assert_eq!(path, "allowWrites");
        let (path, _) = schema_error(r#"{"mailboxes":[], "weird key\n": 1}"#);
        assert_eq!(path, "\"weird key\\n\"");
    }

    #[test]
    fn refuses_non_object_shapes() {
        let (path, rule) = schema_error("[]");
        assert_eq!(path, "(top level)");
        assert_eq!(rule, "must be an object (found an array)");
        let (path, _) = schema_error(r#"[[{"alias":"a","address":"a@example.com"}]]"#);
        assert_eq!(path, "(top level)");
        let (path, _) = schema_error(r#"{"mailboxes":[["a","a@example.com"]]}"#);
        assert_eq!(path, "mailboxes[0]");
        let (path, _) = schema_error(r#"{"mailboxes":{"alias":"a"}}"#);
        assert_eq!(path, "mailboxes");
        let (path, _) = schema_error(
            r#"{"mailboxes":[{"alias":"a","address":"a@example.com","access":{"full":null}}]}"#,
        );
        assert_eq!(path, "mailboxes[0].access");
    }
}
