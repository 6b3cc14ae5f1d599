//! Strict decoding of tool arguments whose errors cannot carry an argument value.
//!
//! Purpose: `serde_json`'s errors quote what they reject (`invalid type: string "hunter2",
//! expected a boolean`, or the name of an unknown field), and such a message travels on as the
//! `INVALID_ARGUMENT` tool result the model reads, the journal's neighbour logs and the CLI
//! prints. Here the arguments are
//! deserialised from the already-parsed JSON through our own [`serde::Deserializer`] whose error
//! type, [`ArgError`], keeps only the *shape* of a failure: where (field names the tool's schema
//! declares, array indices), what kind, and what the schema expected. Every `serde::de::Error`
//! constructor that receives input text (`invalid_type`'s unexpected value, `unknown_variant`,
//! `unknown_field`, `custom`) drops it, so no code path can put a value or a sender-chosen name
//! into the message. [`describe_report`] gives garde's reports the same treatment (schema names,
//! no values). Callers: [`crate::tools::dispatch`] only.

use std::fmt;

use serde::de::{self, DeserializeOwned, Expected, Unexpected};
use serde_json::Value;

use crate::json_tree::{self, Nulls, TreeError};

/// Longest `expected` text kept: it is schema text, but a generous cap keeps messages short.
const MAX_EXPECTED_CHARS: usize = 200;

/// Deserialises `value` into `T`; on failure, an error that names no value.
pub(crate) fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, ArgError> {
    json_tree::deserialize(&value, Nulls::AreNone)
}

/// Why arguments did not deserialise, without any argument value or unknown name.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ArgError {
    /// Innermost first (errors bubble outwards); reversed for display.
    path: Vec<Segment>,
    kind: Kind,
}

#[derive(Debug, PartialEq, Eq)]
enum Segment {
    /// An object key that deserialised as a field. Shown only when the schema declares it.
    Key(String),
    Index(usize),
}

#[derive(Debug, PartialEq, Eq)]
enum Kind {
    InvalidType {
        found: &'static str,
        expected: String,
    },
    InvalidValue {
        found: &'static str,
        expected: String,
    },
    InvalidLength {
        expected: String,
    },
    UnknownVariant {
        expected: &'static [&'static str],
    },
    UnknownField {
        expected: &'static [&'static str],
    },
    MissingField(&'static str),
    DuplicateField(&'static str),
    /// A `custom` error: its text may quote input, so only the fact is kept.
    Other,
}

impl ArgError {
    fn new(kind: Kind) -> Self {
        Self {
            path: Vec::new(),
            kind,
        }
    }

    fn within(mut self, segment: Segment) -> Self {
        self.path.push(segment);
        self
    }

    /// The message of the `INVALID_ARGUMENT` result. `declared` says whether a key is a property
    /// name of the tool's input schema; any other key is shown as `?`, so a name the sender made
    /// up (a secret pasted as a key of a map-typed field, say) is never echoed.
    pub(crate) fn describe(&self, declared: impl Fn(&str) -> bool) -> String {
        let mut path = String::new();
        for segment in self.path.iter().rev() {
            match segment {
                Segment::Key(k) if declared(k) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(k);
                }
                Segment::Key(_) => path.push_str(if path.is_empty() { "?" } else { ".?" }),
                Segment::Index(i) => path.push_str(&format!("[{i}]")),
            }
        }
        let what = match &self.kind {
            Kind::InvalidType { found, expected } => {
                format!("invalid type: expected {expected}, found {found}")
            }
            Kind::InvalidValue { found, expected } => {
                format!("invalid value ({found}): expected {expected}")
            }
            Kind::InvalidLength { expected } => format!("invalid length: expected {expected}"),
            Kind::UnknownVariant { expected } => {
                format!(
                    "unknown variant (not echoed); expected {}",
                    one_of(expected)
                )
            }
            Kind::UnknownField { expected } => {
                format!("unknown field (not echoed); expected {}", one_of(expected))
            }
            Kind::MissingField(f) => format!("missing field `{f}`"),
            Kind::DuplicateField(f) => format!("duplicate field `{f}`"),
            Kind::Other => "the value does not match the schema".to_owned(),
        };
        if path.is_empty() {
            what
        } else {
            format!("{path}: {what}")
        }
    }
}

fn one_of(names: &[&str]) -> String {
    if names.is_empty() {
        return "no fields".to_owned();
    }
    let listed: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    format!("one of {}", listed.join(", "))
}

/// The JSON kind of a rejected value; the value itself is dropped here.
fn kind_of(unexp: &Unexpected<'_>) -> &'static str {
    match unexp {
        Unexpected::Bool(_) => "a boolean",
        Unexpected::Unsigned(_) | Unexpected::Signed(_) | Unexpected::Float(_) => "a number",
        Unexpected::Char(_) | Unexpected::Str(_) => "a string",
        Unexpected::Bytes(_) => "bytes",
        Unexpected::Unit | Unexpected::Option => "null",
        Unexpected::Seq => "an array",
        Unexpected::Map => "an object",
        Unexpected::Enum
        | Unexpected::UnitVariant
        | Unexpected::NewtypeVariant
        | Unexpected::TupleVariant
        | Unexpected::StructVariant => "an enum value",
        Unexpected::NewtypeStruct | Unexpected::Other(_) => "a value",
    }
}

/// `expected` comes from a visitor's `expecting` (type descriptions such as "a boolean" or
/// "struct Criteria"); Rust type names become the JSON kind the tool's schema says, and the
/// text is capped all the same.
fn expected_text(exp: &dyn Expected) -> String {
    let text = exp.to_string();
    let plain = match text.as_str() {
        "u8" => "an integer from 0 to 255",
        "u16" => "an integer from 0 to 65535",
        // Wider types: the schema's own bounds are far smaller, so no Rust range is quoted.
        "u32" | "u64" | "u128" | "usize" => "a non-negative integer",
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "an integer",
        "f32" | "f64" => "a number",
        "a sequence" => "an array",
        "option" => "a value or null",
        _ if text.starts_with("struct ") => "an object",
        _ if text.starts_with("enum ") => "one of the allowed values",
        _ => "",
    };
    if !plain.is_empty() {
        return plain.to_owned();
    }
    match text.char_indices().nth(MAX_EXPECTED_CHARS) {
        Some((cut, _)) => text[..cut].to_owned(),
        None => text,
    }
}

/// A garde report in the tool's own terms: each failed rule as `path: rule`, joined by `; `.
/// garde's paths use Rust field names (`criteria.max_results`); each is shown as the property
/// name the schema declares (`criteria.maxResults`, serde's camelCase rename), and a key that
/// maps to no declared name (a map key the sender chose) is shown as `?`. garde's messages
/// name the rule and the schema's bound (`greater than 100`), never the value.
pub(crate) fn describe_report(report: &garde::Report, declared: impl Fn(&str) -> bool) -> String {
    let mut parts = Vec::new();
    for (path, error) in report.iter() {
        let path = schema_path(path, &declared);
        parts.push(if path.is_empty() {
            error.message().to_owned()
        } else {
            format!("{path}: {}", error.message())
        });
    }
    parts.join("; ")
}

/// A garde path (outermost first) in schema names.
fn schema_path(path: &garde::error::Path, declared: &impl Fn(&str) -> bool) -> String {
    // garde exposes a path's components only through its serde form: `[[kind, name], ...]`.
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Component {
        None,
        Key,
        Index,
    }
    let components: Vec<(Component, String)> = serde_json::to_value(path)
        .and_then(serde_json::from_value)
        .unwrap_or_default();
    let mut out = String::new();
    for (kind, name) in components {
        match kind {
            Component::None => {}
            Component::Index => {
                out.push('[');
                out.push_str(if name.bytes().all(|b| b.is_ascii_digit()) {
                    &name
                } else {
                    "?"
                });
                out.push(']');
            }
            Component::Key => {
                if !out.is_empty() {
                    out.push('.');
                }
                let camel = camel_case(&name);
                out.push_str(if declared(&camel) {
                    &camel
                } else if declared(&name) {
                    &name
                } else {
                    "?"
                });
            }
        }
    }
    out
}

/// serde's `rename_all = "camelCase"` of a snake_case Rust field name.
fn camel_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Without a schema to check keys against, no key is shown.
        f.write_str(&self.describe(|_| false))
    }
}

impl std::error::Error for ArgError {}

impl de::Error for ArgError {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        Self::new(Kind::Other)
    }

    fn invalid_type(unexp: Unexpected<'_>, exp: &dyn Expected) -> Self {
        Self::new(Kind::InvalidType {
            found: kind_of(&unexp),
            expected: expected_text(exp),
        })
    }

    fn invalid_value(unexp: Unexpected<'_>, exp: &dyn Expected) -> Self {
        Self::new(Kind::InvalidValue {
            found: kind_of(&unexp),
            expected: expected_text(exp),
        })
    }

    fn invalid_length(_len: usize, exp: &dyn Expected) -> Self {
        Self::new(Kind::InvalidLength {
            expected: expected_text(exp),
        })
    }

    fn unknown_variant(_variant: &str, expected: &'static [&'static str]) -> Self {
        Self::new(Kind::UnknownVariant { expected })
    }

    fn unknown_field(_field: &str, expected: &'static [&'static str]) -> Self {
        Self::new(Kind::UnknownField { expected })
    }

    fn missing_field(field: &'static str) -> Self {
        Self::new(Kind::MissingField(field))
    }

    fn duplicate_field(field: &'static str) -> Self {
        Self::new(Kind::DuplicateField(field))
    }
}

impl TreeError for ArgError {
    fn at_key(self, key: &str) -> Self {
        self.within(Segment::Key(key.to_owned()))
    }

    fn at_index(self, index: usize) -> Self {
        self.within(Segment::Index(index))
    }

    /// An unknown key is sender-chosen: the error stays at the enclosing object.
    fn at_unknown_key(self, _key: &str) -> Self {
        self
    }

    fn null_refused() -> Self {
        // Not reached: tool arguments read `null` as absent.
        Self::new(Kind::Other)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Order {
        Asc,
        Desc,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Inner {
        max_results: Option<u32>,
        order: Option<Order>,
        labels: Option<Vec<String>>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Outer {
        mailbox: String,
        read: Option<bool>,
        criteria: Option<Inner>,
        extra: Option<std::collections::BTreeMap<String, u8>>,
    }

    const CANARY: &str = "CANARY-7f3a9";

    fn declared(k: &str) -> bool {
        [
            "mailbox",
            "read",
            "criteria",
            "maxResults",
            "order",
            "labels",
            "extra",
        ]
        .contains(&k)
    }

    fn fails(v: Value) -> String {
        from_value::<Outer>(v)
            .expect_err("must not deserialise")
            .describe(declared)
    }

    #[test]
    fn valid_input_deserialises_like_serde_json() {
        let v = json!({"mailbox": "m", "read": true,
            "criteria": {"maxResults": 5, "order": "desc", "labels": ["a", "b"]},
            "extra": {"k": 1}});
        let ours: Outer = from_value(v.clone()).unwrap();
        let theirs: Outer = serde_json::from_value(v).unwrap();
        assert_eq!(ours, theirs);
        let ours: Outer = from_value(json!({"mailbox": "m", "criteria": null})).unwrap();
        assert_eq!(ours.criteria, None);
    }

    #[test]
    fn no_failure_echoes_a_value_or_an_unknown_name() {
        let cases = [
            json!({"mailbox": "m", "read": CANARY}),
            json!({"mailbox": 1234567, "read": true}),
            json!({"mailbox": "m", "criteria": {"order": CANARY}}),
            json!({"mailbox": "m", "criteria": {"maxResults": CANARY}}),
            json!({"mailbox": "m", "criteria": {"maxResults": 99_999_999_999u64}}),
            json!({"mailbox": "m", "criteria": {"maxResults": -7}}),
            json!({"mailbox": "m", "criteria": {"labels": [CANARY, 5]}}),
            json!({"mailbox": "m", CANARY: true}),
            json!({"mailbox": "m", "criteria": {CANARY: CANARY}}),
            json!({"mailbox": "m", "extra": {CANARY: CANARY}}),
            json!({"mailbox": "m", "extra": {CANARY: 300}}),
            json!({"mailbox": [CANARY]}),
            json!({"mailbox": {CANARY: CANARY}}),
            json!({"read": CANARY}),
        ];
        for case in cases {
            let msg = fails(case.clone());
            assert!(!msg.contains("CANARY"), "{case} → {msg}");
            assert!(!msg.contains("1234567") && !msg.contains("99999"), "{msg}");
        }
    }

    #[test]
    fn messages_name_declared_fields_and_what_was_expected() {
        assert_eq!(
            fails(json!({"mailbox": "m", "read": CANARY})),
            "read: invalid type: expected a boolean, found a string"
        );
        assert_eq!(
            fails(json!({"mailbox": "m", "criteria": {"order": CANARY}})),
            "criteria.order: unknown variant (not echoed); expected one of `asc`, `desc`"
        );
        assert!(
            fails(json!({"mailbox": "m", CANARY: 1}))
                .starts_with("unknown field (not echoed); expected one of `mailbox`")
        );
        assert_eq!(
            fails(json!({"mailbox": "m", "criteria": {"labels": ["a", 5]}})),
            "criteria.labels[1]: invalid type: expected a string, found a number"
        );
        assert_eq!(fails(json!({})), "missing field `mailbox`");
        // A map key is not a declared name: shown as `?`.
        assert_eq!(
            fails(json!({"mailbox": "m", "extra": {CANARY: 300}})),
            "extra.?: invalid value (a number): expected an integer from 0 to 255"
        );
    }

    #[derive(Debug, Deserialize, garde::Validate)]
    #[serde(rename_all = "camelCase")]
    struct Rules {
        #[garde(dive)]
        criteria: Option<RuleInner>,
        #[garde(length(max = 2), inner(length(chars, min = 1, max = 3)))]
        message_ids: Vec<String>,
    }

    #[derive(Debug, Deserialize, garde::Validate)]
    #[serde(rename_all = "camelCase")]
    struct RuleInner {
        #[garde(range(min = 1, max = 100))]
        max_results: Option<u32>,
    }

    fn report(v: Value) -> String {
        use garde::Validate as _;
        let rules: Rules = from_value(v).expect("deserialises");
        let report = rules.validate().expect_err("must break a rule");
        let declared = |k: &str| ["criteria", "maxResults", "messageIds"].contains(&k);
        describe_report(&report, declared)
    }

    #[test]
    fn garde_reports_use_the_schema_names_and_no_values() {
        assert_eq!(
            report(json!({"criteria": {"maxResults": 101}, "messageIds": []})),
            "criteria.maxResults: greater than 100"
        );
        let both = report(json!({"messageIds": ["a", CANARY, "b"]}));
        assert!(both.contains("messageIds: "), "{both}");
        assert!(both.contains("messageIds[1]: "), "{both}");
        assert!(
            !both.contains("CANARY") && !both.contains("message_ids"),
            "{both}"
        );
        assert_eq!(
            camel_case("max_messages_per_folder"),
            "maxMessagesPerFolder"
        );
        assert_eq!(camel_case("mailbox"), "mailbox");
    }

    #[test]
    fn display_without_a_schema_shows_no_key() {
        let err = from_value::<Outer>(json!({"mailbox": "m", "read": 1})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "?: invalid type: expected a boolean, found a number"
        );
    }
}
