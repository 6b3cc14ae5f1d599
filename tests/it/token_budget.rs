//! Issue 9, token economy: what a model pays for the tool list every turn and for an answer.
//!
//! Budgets, in bytes of compact JSON of the whole `tools/list` result (`{"tools":[...]}`): the
//! 12-tool catalog at most the reference plugin's 13,041, every other catalog at most 20,000.
//! Schemas use only JSON Schema 2020-12 keywords and formats, inline everything (no `$ref`), give
//! every top-level property a `type`, and never advertise `null` for an input. Checked over the
//! published `policy/catalogs/*.json` and over what the real binary serves for each gate setting.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::util::{World, gated_world, shared_demo_config, text_of};

/// The reference plugin's 12-tool `tools/list`, compact JSON.
const READ_CATALOG_BUDGET: usize = 13_041;
/// Every larger catalog (the 20-tool one is the largest).
const CATALOG_BUDGET: usize = 20_000;

/// The `format` values JSON Schema 2020-12 defines.
const STANDARD_FORMATS: [&str; 19] = [
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

/// The JSON Schema 2020-12 keywords a published schema may use (core annotations, applicators
/// and validation; no `$ref`, `$defs`, `$schema` or vendor extensions).
const STANDARD_KEYWORDS: [&str; 39] = [
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "items",
    "prefixItems",
    "contains",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
];

fn compact_len(v: &Value) -> usize {
    serde_json::to_vec(v).unwrap().len()
}

fn budget(tools: usize) -> usize {
    if tools <= 12 {
        READ_CATALOG_BUDGET
    } else {
        CATALOG_BUDGET
    }
}

fn catalog_name(handoffs: bool, writes: bool, send: bool) -> String {
    let mut name = String::from("read");
    for (on, part) in [
        (handoffs, "+handoffs"),
        (writes, "+writes"),
        (send, "+send"),
    ] {
        if on {
            name.push_str(part);
        }
    }
    name
}

/// One published catalog: the full contract, output schemas included.
fn published(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("policy/catalogs/{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// What `tools/list` serves by default: the published catalog without output schemas.
fn served_by_default(catalog: &Value) -> Value {
    let mut served = catalog.clone();
    for tool in served["tools"].as_array_mut().unwrap() {
        tool.as_object_mut().unwrap().remove("outputSchema");
    }
    served
}

/// Calls `f` on every subschema, the root included, at schema positions only (a property that
/// happens to be named `format` or `type` is not a keyword).
fn each_schema<'a>(schema: &'a Value, f: &mut dyn FnMut(&'a Map<String, Value>)) {
    let Some(o) = schema.as_object() else { return };
    f(o);
    if let Some(Value::Object(props)) = o.get("properties") {
        props.values().for_each(|v| each_schema(v, f));
    }
    for k in [
        "items",
        "additionalProperties",
        "contains",
        "not",
        "if",
        "then",
        "else",
    ] {
        if let Some(v) = o.get(k) {
            each_schema(v, f);
        }
    }
    for k in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(a)) = o.get(k) {
            a.iter().for_each(|v| each_schema(v, f));
        }
    }
}

fn is_null_type(t: &Value) -> bool {
    t == "null" || t.as_array().is_some_and(|a| a.iter().any(|x| x == "null"))
}

/// Every rule a published schema must keep; returns the breaches, each naming where.
fn schema_breaches(tool: &str, which: &str, schema: &Value) -> Vec<String> {
    let input = which == "inputSchema";
    let mut bad = Vec::new();
    let root = schema.as_object().unwrap();
    for k in ["$schema", "title"] {
        if root.contains_key(k) {
            bad.push(format!("{tool} {which}: root {k}"));
        }
    }
    each_schema(schema, &mut |o| {
        for k in o.keys() {
            if !STANDARD_KEYWORDS.contains(&k.as_str()) {
                bad.push(format!("{tool} {which}: keyword {k}"));
            }
        }
        if let Some(f) = o.get("format").and_then(Value::as_str)
            && !STANDARD_FORMATS.contains(&f)
        {
            bad.push(format!("{tool} {which}: format {f}"));
        }
        let null_member = ["anyOf", "oneOf"].iter().any(|k| {
            o.get(*k)
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|m| m.get("type").is_some_and(is_null_type)))
        });
        let null_enum = o
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(Value::is_null));
        if input && (o.get("type").is_some_and(is_null_type) || null_member || null_enum) {
            bad.push(format!("{tool} {which}: null advertised for an input"));
        }
        if !input && (null_member || null_enum) {
            bad.push(format!("{tool} {which}: null union"));
        }
    });
    let required: Vec<&str> = root
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (name, prop) in root["properties"].as_object().unwrap() {
        match prop.get("type") {
            Some(Value::String(t)) if t != "null" => {}
            // An output field that is always written and may be null (e.g. the reference's
            // `dateRange: null`): its one other type, never a bare null.
            Some(Value::Array(types))
                if !input
                    && required.contains(&name.as_str())
                    && types.len() == 2
                    && types.iter().any(|t| t == "null") => {}
            other => bad.push(format!(
                "{tool} {which}: property {name} has type {other:?}"
            )),
        }
    }
    bad
}

#[test]
fn every_published_catalog_fits_its_budget_and_uses_standard_schemas() {
    let mut sizes = Vec::new();
    let mut bad = Vec::new();
    for bits in 0..8u8 {
        let name = catalog_name(bits & 1 != 0, bits & 2 != 0, bits & 4 != 0);
        let catalog = published(&name);
        let tools = catalog["tools"].as_array().unwrap();
        let served = compact_len(&served_by_default(&catalog));
        sizes.push(format!("{name}: {} tools, {served} B", tools.len()));
        if served > budget(tools.len()) {
            bad.push(format!(
                "{name}: {served} B served, budget {}",
                budget(tools.len())
            ));
        }
        for tool in tools {
            let tool_name = tool["name"].as_str().unwrap();
            bad.extend(schema_breaches(
                tool_name,
                "inputSchema",
                &tool["inputSchema"],
            ));
            let output = tool.get("outputSchema");
            assert!(output.is_some(), "{name}/{tool_name}: the full contract");
            bad.extend(schema_breaches(tool_name, "outputSchema", output.unwrap()));
            assert!(
                tool["annotations"].get("title").is_none(),
                "{tool_name}: the title is said once, at the tool"
            );
        }
    }
    assert!(bad.is_empty(), "{bad:#?}\n{sizes:#?}");
}

#[tokio::test]
async fn the_served_tool_list_is_the_published_one_without_output_schemas() {
    for bits in 0..8u8 {
        let (h, w, s) = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0);
        let name = catalog_name(h, w, s);
        let world = gated_world(h, w, s);
        let served = json!({ "tools": world.shared_demo_tools().await });
        let tools = served["tools"].as_array().unwrap();
        assert!(
            tools.iter().all(|t| t.get("outputSchema").is_none()),
            "{name}: output schemas are opt-in"
        );
        let bytes = compact_len(&served);
        assert!(
            bytes <= budget(tools.len()),
            "{name}: tools/list is {bytes} B, budget {}",
            budget(tools.len())
        );
        assert_eq!(
            served,
            served_by_default(&published(&name)),
            "{name}: what is served is what policy/ publishes"
        );
    }
}

/// The one check a validating client makes that a compact schema could break: every required
/// field is present with its declared type, at the top level.
fn conforms(value: &Value, schema: &Value) -> Result<(), String> {
    for name in schema["required"].as_array().into_iter().flatten() {
        let name = name.as_str().unwrap();
        let Some(v) = value.get(name) else {
            return Err(format!("{name} missing"));
        };
        let types: Vec<&str> = match &schema["properties"][name]["type"] {
            Value::String(t) => vec![t.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => continue,
        };
        let actual = match v {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        let widened = actual == "integer" && types.contains(&"number");
        if !types.contains(&actual) && !widened {
            return Err(format!("{name} is {actual}, schema says {types:?}"));
        }
    }
    Ok(())
}

#[tokio::test]
async fn output_schemas_are_opt_in_and_the_answers_conform() {
    let world = gated_world(false, false, false).with("MAILGATE_OUTPUT_SCHEMAS", "true");
    let client = world.shared_demo_client().await;
    let served = json!({ "tools": client.tools().await });
    let published = published("read");
    assert_eq!(served, published, "opted in: the full contract of policy/");
    let schema_of = |tool: &str| {
        published["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == tool)
            .unwrap()["outputSchema"]
            .clone()
    };
    for (tool, args) in [
        ("list_allowed_mailboxes", json!({})),
        (
            "list_messages",
            json!({"mailbox": "finance", "criteria": {"maxResults": 20}}),
        ),
        (
            "search_mailbox",
            json!({"mailbox": "finance", "criteria": {"query": "invoice"}}),
        ),
        ("list_folders", json!({"mailbox": "finance"})),
        (
            "get_folder_stats",
            json!({"mailbox": "finance", "folderId": "inbox"}),
        ),
    ] {
        let structured = client.ok(tool, args).await;
        conforms(&structured, &schema_of(tool)).unwrap_or_else(|e| panic!("{tool}: {e}"));
    }
    client.close().await;

    // A strict boolean, like every other switch: an unknown spelling stops startup.
    let world = World::new();
    let config = shared_demo_config(&world);
    let out = world
        .run_with(
            &[("MAILGATE_OUTPUT_SCHEMAS", "sometimes")],
            &["--config", &config, "tools"],
        )
        .await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("MAILGATE_OUTPUT_SCHEMAS must be a boolean"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_twenty_message_listing_costs_less_text_than_its_structured_copy() {
    // The world owns the state folder: it must outlive the server.
    let world = World::new();
    let client = world.shared_demo_client().await;
    let result = client
        .call(
            "list_messages",
            json!({"mailbox": "finance", "criteria": {"maxResults": 20}}),
        )
        .await
        .unwrap();
    let structured = result.structured_content.clone().unwrap();
    let messages = structured["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 20, "{structured}");
    let text = text_of(&result);
    let structured_bytes = compact_len(&structured);
    // Before issue 9 the text repeated the structured JSON whole (10,768 B against 10,298):
    // now every field name is written once per list.
    assert!(
        text.len() * 100 <= structured_bytes * 85,
        "text {} B, structured {structured_bytes} B",
        text.len()
    );
    // Compact, not lossy: every message is there, and the fence is kept.
    for m in messages {
        assert!(text.contains(m["id"].as_str().unwrap()));
        assert!(text.contains(&serde_json::to_string(&m["subject"]).unwrap()));
    }
    let nonce = structured["untrustedDataFence"].as_str().unwrap();
    assert!(text.contains(&format!("<<<END_UNTRUSTED_EMAIL_DATA_V1 nonce={nonce}>>>")));
    assert!(
        !text.contains("dataTrust"),
        "bookkeeping is in the fence's words"
    );
    // Listings carry what an agent uses: no second identical timestamp, no `false` flag.
    for m in messages {
        assert_ne!(m.get("sentDateTime"), Some(&m["receivedDateTime"]), "{m}");
        assert_ne!(m.get("isFlagged"), Some(&json!(false)), "{m}");
        for evidence in [
            "id",
            "subject",
            "isRead",
            "hasAttachments",
            "attachmentCount",
        ] {
            assert!(m.get(evidence).is_some(), "{evidence} in {m}");
        }
    }
    for evidence in [
        "status",
        "truncated",
        "warnings",
        "confidence",
        "canaryMatched",
        "pagesScanned",
        "candidatesScanned",
    ] {
        assert!(structured.get(evidence).is_some(), "{evidence}");
    }
    client.close().await;
}
