//! The JSON Schemas a tool publishes, derived from its Rust types by schemars and reduced to what
//! every MCP client understands (issue 9, "Token economy").
//!
//! Invariant: a published schema uses only JSON Schema 2020-12 keywords and the standard
//! `format` values ([`STANDARD_FORMATS`]); it has no `$ref`/`$defs` (subschemas are inlined, since
//! form-based clients such as MCP Inspector's CLI cannot fill a bare `$ref`), no `$schema` or
//! `title` at the root, and no `null` in an input: an optional argument is simply absent. Bounds,
//! patterns, enums and `additionalProperties: false` are kept, because the same garde rules
//! enforce them. Output schemas keep `null` only for a field that is always written and may be
//! null (the serialise contract); a field skipped when empty is plain optional. Called by
//! `input_schema`/`output_schema` in `tools/mod.rs` only; results are cached per type.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// The `format` values JSON Schema 2020-12 defines (§7.3 of the validation vocabulary). schemars
/// also emits `uint32`, `uint64`, `uint`, `int32`…, which validators warn about; those go.
pub(crate) const STANDARD_FORMATS: [&str; 19] = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Which side of the contract a schema describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Contract {
    /// What the tool accepts (deserialise contract): optional means absent, never `null`.
    Input,
    /// What the tool writes (serialise contract).
    Output,
}

type Cache = Mutex<HashMap<(TypeId, Contract), Arc<JsonObject>>>;

/// The published schema of `T`, generated once per type and contract (`tools/list`, every
/// call's argument check and the journal all ask for it).
pub(crate) fn for_type<T: JsonSchema + 'static>(contract: Contract) -> Arc<JsonObject> {
    static CACHE: LazyLock<Cache> = LazyLock::new(Mutex::default);
    let key = (TypeId::of::<T>(), contract);
    // A poisoned lock only means another thread panicked mid-insert; the map is still valid.
    if let Some(hit) = CACHE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return Arc::clone(hit);
    }
    let schema = Arc::new(generate::<T>(contract));
    CACHE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, Arc::clone(&schema));
    schema
}

fn generate<T: JsonSchema>(contract: Contract) -> JsonObject {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let settings = match contract {
        Contract::Input => settings.for_deserialize(),
        Contract::Output => settings.for_serialize(),
    };
    let mut value = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Value::Object(root) = &mut value {
        // The root's title is the Rust type name and its description the type's doc comment:
        // the tool's own title and description say it better, so they only cost bytes.
        root.remove("title");
        root.remove("description");
        let defs = root.remove("$defs");
        if let Some(Value::Object(defs)) = defs {
            // Inlining is on, so only a recursive type would leave a definition behind.
            resolve_refs(root, &defs, 0);
        }
        tidy(root, contract, false, 0);
        root.remove("$schema");
        if contract == Contract::Input && !root.contains_key("properties") {
            // An argument-less tool still says "no properties": some clients (function-calling
            // APIs among them) require the key on an object schema.
            root.insert("properties".into(), Value::Object(Map::new()));
        }
        std::mem::take(root)
    } else {
        JsonObject::new()
    }
}

/// Replaces every `{"$ref": "#/$defs/X", ...}` with X's schema (the referring object's own
/// keywords win). The depth bound stops a recursive type; none exists today.
fn resolve_refs(schema: &mut JsonObject, defs: &Map<String, Value>, depth: usize) {
    if depth > 16 {
        return;
    }
    if let Some(Value::String(target)) = schema.get("$ref") {
        let name = target.strip_prefix("#/$defs/").unwrap_or(target);
        if let Some(Value::Object(def)) = defs.get(name) {
            let def = def.clone();
            schema.remove("$ref");
            for (k, v) in def {
                schema.entry(k).or_insert(v);
            }
        }
    }
    for value in schema.values_mut() {
        visit_objects(value, &mut |o| resolve_refs(o, defs, depth + 1));
    }
}

fn visit_objects(value: &mut Value, f: &mut impl FnMut(&mut JsonObject)) {
    match value {
        Value::Object(o) => f(o),
        Value::Array(items) => items.iter_mut().for_each(|v| visit_objects(v, f)),
        _ => {}
    }
}

fn is_null_schema(v: &Value) -> bool {
    v.get("type").and_then(Value::as_str) == Some("null")
        && v.as_object().is_some_and(|o| o.len() == 1)
}

/// Reduces one schema object in place (see the module doc). `keep_null`: this is an output
/// field that is always written, so its `null` is real. `depth`: 0 for the root, 1 for its
/// properties (the top level), more below.
fn tidy(schema: &mut JsonObject, contract: Contract, keep_null: bool, depth: usize) {
    let nested = depth >= 2;
    schema.remove("title");
    schema.remove("nullable");
    // `null` and `[]` defaults say what absence already says (an optional list is empty).
    if schema
        .get("default")
        .is_some_and(|d| d.is_null() || d.as_array().is_some_and(Vec::is_empty))
    {
        schema.remove("default");
    }
    if schema
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !STANDARD_FORMATS.contains(&f))
    {
        schema.remove("format");
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(members)) = schema.get_mut(key) else {
            continue;
        };
        if !keep_null {
            members.retain(|m| !is_null_schema(m));
        }
        if members.len() == 1 {
            // `Option<T>` in schemars is `anyOf: [T, null]`: with the null gone, T is the field.
            if let Some(Value::Object(only)) = members.pop() {
                schema.remove(key);
                for (k, v) in only {
                    schema.entry(k).or_insert(v);
                }
            }
        }
    }
    if !keep_null && let Some(Value::Array(values)) = schema.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    match schema.get_mut("type") {
        Some(Value::Array(types)) => {
            if !keep_null {
                types.retain(|t| t != "null");
            }
            if types.len() == 1 {
                let only = types.remove(0);
                schema.insert("type".into(), only);
            }
        }
        Some(_) => {}
        None => {
            // An enum whose variants carry docs is a `oneOf` of consts: give the field the type
            // its members share, so a form-based client knows what to render.
            if let Some(t) = shared_member_type(schema) {
                schema.insert("type".into(), t);
            }
        }
    }

    if nested
        && schema.get("type") == Some(&Value::from("string"))
        && schema
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|v| v.iter().all(Value::is_string))
    {
        // Below the top level an enum of strings says its type already (top-level properties
        // keep `type`: form-based clients build their fields from it).
        schema.remove("type");
    }

    let required: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        for (name, sub) in props.iter_mut() {
            if let Value::Object(sub) = sub {
                let always_written = contract == Contract::Output && required.contains(name);
                tidy(sub, contract, always_written, depth + 1);
            }
        }
    }
    for key in [
        "items",
        "additionalProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
    ] {
        if let Some(Value::Object(sub)) = schema.get_mut(key) {
            tidy(sub, contract, false, depth + 1);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(members)) = schema.get_mut(key) {
            for m in members.iter_mut() {
                if let Value::Object(m) = m {
                    tidy(m, contract, false, depth + 1);
                }
            }
        }
    }
}

fn shared_member_type(schema: &JsonObject) -> Option<Value> {
    let members = schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))?
        .as_array()?;
    let first = members.first()?.get("type")?;
    members
        .iter()
        .all(|m| m.get("type") == Some(first))
        .then(|| first.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, serde::Serialize, JsonSchema)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Inner {
        /// A bounded count.
        #[schemars(range(min = 1, max = 10))]
        max_pages: Option<u32>,
        flag: Option<bool>,
        kind: Option<Kind>,
    }

    #[derive(serde::Deserialize, serde::Serialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    enum Kind {
        /// The first.
        One,
        /// The second.
        Two,
    }

    /// Outer doc.
    #[derive(serde::Deserialize, serde::Serialize, JsonSchema)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Outer {
        #[schemars(length(min = 1, max = 5), pattern(r"^[a-z]+$"))]
        name: String,
        #[serde(default)]
        inner: Option<Inner>,
        list: Option<Vec<u64>>,
        /// Written always, may be null.
        maybe: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        sometimes: Option<String>,
    }

    fn walk(v: &Value, f: &mut impl FnMut(&JsonObject)) {
        match v {
            Value::Object(o) => {
                f(o);
                o.values().for_each(|c| walk(c, f));
            }
            Value::Array(a) => a.iter().for_each(|c| walk(c, f)),
            _ => {}
        }
    }

    #[test]
    fn an_input_schema_is_inlined_null_free_and_standard() {
        let s = Value::Object(generate::<Outer>(Contract::Input));
        let text = s.to_string();
        for banned in [
            "$ref",
            "$defs",
            "$schema",
            "\"title\"",
            "uint",
            "\"null\"",
            "Outer doc",
        ] {
            assert!(!text.contains(banned), "{banned} in {text}");
        }
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(s["properties"]["name"]["pattern"], "^[a-z]+$");
        assert_eq!(s["properties"]["name"]["maxLength"], 5);
        let inner = &s["properties"]["inner"];
        assert_eq!(inner["type"], "object");
        assert_eq!(inner["additionalProperties"], false);
        assert_eq!(inner["properties"]["maxPages"]["type"], "integer");
        assert_eq!(inner["properties"]["maxPages"]["maximum"], 10);
        assert_eq!(
            inner["properties"]["maxPages"]["description"],
            "A bounded count."
        );
        assert_eq!(inner["properties"]["kind"]["type"], "string");
        assert_eq!(s["properties"]["list"]["type"], "array");
        for (name, prop) in s["properties"].as_object().unwrap() {
            assert!(prop["type"].is_string(), "{name} has no single type");
        }
        walk(&s, &mut |o| {
            if let Some(f) = o.get("format").and_then(Value::as_str) {
                assert!(STANDARD_FORMATS.contains(&f), "{f}");
            }
        });
    }

    #[test]
    fn an_output_schema_keeps_null_only_where_it_is_written() {
        let s = Value::Object(generate::<Outer>(Contract::Output));
        assert_eq!(
            s["properties"]["maybe"]["type"],
            serde_json::json!(["string", "null"])
        );
        assert_eq!(s["properties"]["sometimes"]["type"], "string");
        assert!(!s.to_string().contains("$ref"));
    }

    #[test]
    fn schemas_are_cached_per_type_and_contract() {
        let a = for_type::<Outer>(Contract::Input);
        let b = for_type::<Outer>(Contract::Input);
        assert!(Arc::ptr_eq(&a, &b));
        assert_ne!(*a, *for_type::<Outer>(Contract::Output));
    }
}
