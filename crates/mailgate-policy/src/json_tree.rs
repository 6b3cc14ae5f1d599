//! One strict `serde` deserializer over an already-parsed JSON tree, shared by the two places
//! that decode untrusted JSON into typed input: `plugin.json` (`config::raw`) and tool arguments
//! (`tools::strict`).
//!
//! Purpose: serde's own errors quote what they reject, and both callers promise that an error
//! names a path and a rule, never a value. Each caller brings its own error type (implementing
//! [`TreeError`]: how a path segment is added, what a refused `null` says); this module walks the
//! tree and never hands a value to an error constructor.
//!
//! Invariants: structs must be JSON objects (no positional arrays); enums are plain strings; a
//! sequence a visitor does not consume wholly is a length error; an object key that fails to
//! deserialise (an unknown field) is reported through [`TreeError::at_unknown_key`], so the
//! caller decides whether the key may be shown. `null` for an optional value is `None` or an
//! error, as the caller's [`Nulls`] says.

use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Unexpected, Visitor};
use serde_json::Value;

/// What a caller's error type adds to serde's error constructors.
pub trait TreeError: de::Error {
    /// The error, located one object key further out.
    fn at_key(self, key: &str) -> Self;
    /// The error, located one array index further out.
    fn at_index(self, index: usize) -> Self;
    /// The error of a key that did not deserialise (an unknown field): by default located at that
    /// key; a caller that must not echo sender-chosen names leaves the key out.
    fn at_unknown_key(self, key: &str) -> Self {
        self.at_key(key)
    }
    /// `null` where an optional value was expected, under [`Nulls::Refused`].
    fn null_refused() -> Self;
}

/// How `null` is read where a value is optional.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nulls {
    /// As absent (`None`): MCP clients send `null` for an unset optional argument.
    AreNone,
    /// As an error: an operator's file says what it means by leaving the key out.
    Refused,
}

/// Deserialises `T` from `value`; errors are `E`, which never holds a value.
pub fn deserialize<'a, T: Deserialize<'a>, E: TreeError>(
    value: &'a Value,
    nulls: Nulls,
) -> Result<T, E> {
    T::deserialize(TreeDe::<E>::new(value, nulls))
}

struct TreeDe<'a, E> {
    value: &'a Value,
    nulls: Nulls,
    error: PhantomData<E>,
}

impl<'a, E> TreeDe<'a, E> {
    fn new(value: &'a Value, nulls: Nulls) -> Self {
        Self {
            value,
            nulls,
            error: PhantomData,
        }
    }
}

/// The value-free [`Unexpected`] of a value, for errors raised here rather than by a visitor.
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

impl<'de, E: TreeError> de::Deserializer<'de> for TreeDe<'de, E> {
    type Error = E;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        match self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else {
                    visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(items) => {
                let mut seq = TreeSeq::<E> {
                    items: items.iter().enumerate(),
                    nulls: self.nulls,
                    error: PhantomData,
                };
                let value = visitor.visit_seq(&mut seq)?;
                if seq.items.len() == 0 {
                    Ok(value)
                } else {
                    Err(de::Error::invalid_length(items.len(), &"fewer elements"))
                }
            }
            Value::Object(map) => visitor.visit_map(TreeMap::<E> {
                entries: map.iter(),
                pending: None,
                nulls: self.nulls,
                error: PhantomData,
            }),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        match (self.value, self.nulls) {
            (Value::Null, Nulls::AreNone) => visitor.visit_none(),
            (Value::Null, Nulls::Refused) => Err(E::null_refused()),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, E> {
        match self.value {
            Value::Object(_) => self.deserialize_any(visitor),
            other => Err(de::Error::invalid_type(unexpected(other), &visitor)),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, E> {
        match self.value {
            Value::String(s) => visitor.visit_enum(BorrowedStrDeserializer::<'de, E>::new(s)),
            other => Err(de::Error::invalid_type(
                unexpected(other),
                &"a string naming a variant",
            )),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, E> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map identifier
    }
}

struct TreeSeq<'a, E> {
    items: std::iter::Enumerate<std::slice::Iter<'a, Value>>,
    nulls: Nulls,
    error: PhantomData<E>,
}

impl<'de, E: TreeError> SeqAccess<'de> for TreeSeq<'de, E> {
    type Error = E;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, E> {
        match self.items.next() {
            None => Ok(None),
            Some((index, value)) => seed
                .deserialize(TreeDe::new(value, self.nulls))
                .map(Some)
                .map_err(|error: E| error.at_index(index)),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct TreeMap<'a, E> {
    entries: serde_json::map::Iter<'a>,
    /// The key just handed out and its value, for `next_value_seed`.
    pending: Option<(&'a str, &'a Value)>,
    nulls: Nulls,
    error: PhantomData<E>,
}

impl<'de, E: TreeError> MapAccess<'de> for TreeMap<'de, E> {
    type Error = E;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, E> {
        match self.entries.next() {
            None => Ok(None),
            Some((key, value)) => {
                self.pending = Some((key.as_str(), value));
                seed.deserialize(BorrowedStrDeserializer::<'de, E>::new(key.as_str()))
                    .map(Some)
                    .map_err(|error| error.at_unknown_key(key))
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, E> {
        let Some((key, value)) = self.pending.take() else {
            return Err(de::Error::custom("value requested before its key"));
        };
        seed.deserialize(TreeDe::new(value, self.nulls))
            .map_err(|error: E| error.at_key(key))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    /// A test error that records the path and the rule.
    #[derive(Debug, PartialEq)]
    struct Fail(String);

    impl fmt::Display for Fail {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl std::error::Error for Fail {}

    impl de::Error for Fail {
        fn custom<T: fmt::Display>(_msg: T) -> Self {
            Fail("custom".into())
        }
        fn invalid_type(_u: Unexpected<'_>, _e: &dyn de::Expected) -> Self {
            Fail("type".into())
        }
        fn unknown_field(_f: &str, _e: &'static [&'static str]) -> Self {
            Fail("unknown".into())
        }
    }

    impl TreeError for Fail {
        fn at_key(self, key: &str) -> Self {
            Fail(format!("{key}.{}", self.0))
        }
        fn at_index(self, index: usize) -> Self {
            Fail(format!("[{index}].{}", self.0))
        }
        fn null_refused() -> Self {
            Fail("null".into())
        }
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct S {
        a: Option<u8>,
        list: Option<Vec<Mode>>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Mode {
        On,
    }

    fn de(value: Value, nulls: Nulls) -> Result<S, Fail> {
        deserialize(&value, nulls)
    }

    #[test]
    fn the_two_null_policies() {
        assert_eq!(
            de(json!({"a": null}), Nulls::AreNone),
            Ok(S {
                a: None,
                list: None
            })
        );
        assert_eq!(
            de(json!({"a": null}), Nulls::Refused),
            Err(Fail("a.null".into()))
        );
    }

    #[test]
    fn structs_are_objects_and_enums_are_strings() {
        assert_eq!(
            de(json!([1, null]), Nulls::AreNone),
            Err(Fail("type".into()))
        );
        assert_eq!(
            de(json!({"list": [{"on": null}]}), Nulls::AreNone),
            Err(Fail("list.[0].type".into()))
        );
        assert_eq!(
            de(json!({"list": ["on"]}), Nulls::AreNone),
            Ok(S {
                a: None,
                list: Some(vec![Mode::On])
            })
        );
    }

    #[test]
    fn an_unknown_key_is_located_through_the_callers_hook() {
        assert_eq!(
            de(json!({"secret-name": 1}), Nulls::AreNone),
            Err(Fail("secret-name.unknown".into()))
        );
    }
}
