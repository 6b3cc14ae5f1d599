//! Strict decoding of tool arguments whose errors cannot carry an argument value.
//!
//! Purpose: `serde_json`'s errors quote what they reject (`invalid type: string "hunter2",
//! expected a boolean`, or the name of an unknown field), and such a message travels on as the
//! `invalid_params` text, which the MCP library logs and the CLI prints. Here the arguments are
//! deserialised from the already-parsed JSON through our own [`serde::Deserializer`] whose error
//! type, [`ArgError`], keeps only the *shape* of a failure: where (field names the tool's schema
//! declares, array indices), what kind, and what the schema expected. Every `serde::de::Error`
//! constructor that receives input text (`invalid_type`'s unexpected value, `unknown_variant`,
//! `unknown_field`, `custom`) drops it, so no code path can put a value or a sender-chosen name
//! into the message. Callers: [`crate::tools::dispatch`] only.

use std::fmt;

use serde::de::value::{MapAccessDeserializer, StringDeserializer};
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Expected, IntoDeserializer, MapAccess, SeqAccess,
    Unexpected, Visitor,
};
use serde_json::{Map, Value};

/// Longest `expected` text kept: it is schema text, but a generous cap keeps messages short.
const MAX_EXPECTED_CHARS: usize = 200;

/// Deserialises `value` into `T`; on failure, an error that names no value.
pub(crate) fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, ArgError> {
    T::deserialize(ValueDe(value))
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

    /// The message for the `invalid_params` channel. `declared` says whether a key is a property
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
/// "struct Criteria"); it is capped all the same.
fn expected_text(exp: &dyn Expected) -> String {
    let text = exp.to_string();
    match text.char_indices().nth(MAX_EXPECTED_CHARS) {
        Some((cut, _)) => text[..cut].to_owned(),
        None => text,
    }
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

/// A `serde_json::Value` as a deserializer with [`ArgError`] errors. Numbers are offered as
/// `u64`, `i64` or `f64` in that order, as `serde_json` does.
struct ValueDe(Value);

impl<'de> de::Deserializer<'de> for ValueDe {
    type Error = ArgError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ArgError> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else {
                    visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => visitor.visit_string(s),
            Value::Array(items) => {
                let mut seq = Seq {
                    items: items.into_iter().enumerate(),
                };
                let value = visitor.visit_seq(&mut seq)?;
                if seq.items.len() == 0 {
                    Ok(value)
                } else {
                    Err(de::Error::invalid_length(0, &"fewer elements"))
                }
            }
            Value::Object(map) => visitor.visit_map(Entries::new(map)),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ArgError> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            other => visitor.visit_some(ValueDe(other)),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ArgError> {
        match self.0 {
            Value::String(s) => {
                let de: StringDeserializer<ArgError> = s.into_deserializer();
                visitor.visit_enum(de)
            }
            Value::Object(map) if map.len() == 1 => {
                visitor.visit_enum(MapAccessDeserializer::new(Entries::new(map)))
            }
            other => Err(de::Error::invalid_type(
                unexpected(&other),
                &"a string naming a variant",
            )),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ArgError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ArgError> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

/// The value-free [`Unexpected`] of a value (for errors raised here rather than by a visitor).
fn unexpected(value: &Value) -> Unexpected<'static> {
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(_) => Unexpected::Bool(false),
        Value::Number(_) => Unexpected::Unsigned(0),
        Value::String(_) => Unexpected::Str(""),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

struct Seq {
    items: std::iter::Enumerate<std::vec::IntoIter<Value>>,
}

impl<'de> SeqAccess<'de> for Seq {
    type Error = ArgError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, ArgError> {
        match self.items.next() {
            Some((i, v)) => seed
                .deserialize(ValueDe(v))
                .map(Some)
                .map_err(|e| e.within(Segment::Index(i))),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct Entries {
    entries: serde_json::map::IntoIter,
    /// The key just handed out and its value, for `next_value_seed`.
    pending: Option<(String, Value)>,
}

impl Entries {
    fn new(map: Map<String, Value>) -> Self {
        Self {
            entries: map.into_iter(),
            pending: None,
        }
    }
}

impl<'de> MapAccess<'de> for Entries {
    type Error = ArgError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, ArgError> {
        match self.entries.next() {
            Some((k, v)) => {
                let de: StringDeserializer<ArgError> = k.clone().into_deserializer();
                let key = seed.deserialize(de)?;
                self.pending = Some((k, v));
                Ok(Some(key))
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, ArgError> {
        let Some((k, v)) = self.pending.take() else {
            return Err(de::Error::custom("value requested before its key"));
        };
        seed.deserialize(ValueDe(v))
            .map_err(|e| e.within(Segment::Key(k)))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
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
            "extra.?: invalid value (a number): expected u8"
        );
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
