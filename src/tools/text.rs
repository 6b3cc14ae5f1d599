//! The text block of a tool answer: the structured payload again, compactly, for clients that
//! show the model only text (issue 9, token economy).
//!
//! Invariant: the text carries every value of the structured content (nothing is summarised
//! away), as compact JSON in which a list of flat records is written as a table, so a field name
//! costs its bytes once per list rather than once per record. Called by `ToolOutput::render`
//! only; the untrusted-data fence around it is `framing`'s.

use rmcp::model::JsonObject;
use serde_json::Value;

/// Says how to read a table in the text block (only when the text has one).
pub(super) const TABLE_NOTE: &str = "Lists of records are tables: fields equal in every record once in \
     \"every\", the others as \"columns\" and one \"rows\" line per record (null = absent).";

/// The text block's copy of `structured`: compact JSON in which every list of two or more flat
/// records (objects holding no list of objects, e.g. the messages of a listing) becomes a table
/// of `columns` and one `rows` line per record, so a field name is written once per list instead
/// of once per record (a 20-message listing: 10.8 KB of text before, about 6 KB after). Returns
/// whether a table was written.
pub(super) fn payload(structured: &Value) -> (String, bool) {
    let mut out = String::new();
    let mut tables = false;
    write_compact(structured, &mut out, &mut tables);
    (out, tables)
}

fn write_compact(value: &Value, out: &mut String, tables: &mut bool) {
    match value {
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(k.as_str()).to_string());
                out.push(':');
                write_compact(v, out, tables);
            }
            out.push('}');
        }
        Value::Array(items) if is_table(items) => {
            *tables = true;
            write_table(items, out, tables);
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_compact(v, out, tables);
            }
            out.push(']');
        }
        leaf => out.push_str(&leaf.to_string()),
    }
}

/// `{"every":{..},"columns":[..],"rows":[..]}`: a field with one value in every record (absent
/// everywhere: left out) is written once in `every`; the others are columns, `id` first (what
/// the next call needs), with `null` for a record that lacks the field.
fn write_table(items: &[Value], out: &mut String, tables: &mut bool) {
    let records: Vec<&JsonObject> = items.iter().filter_map(Value::as_object).collect();
    let mut names: Vec<&str> = Vec::new();
    for record in &records {
        for k in record.keys() {
            if !names.contains(&k.as_str()) {
                names.push(k);
            }
        }
    }
    let (every, mut columns): (Vec<&str>, Vec<&str>) = names.into_iter().partition(|name| {
        let first = records.first().and_then(|r| r.get(*name));
        records.iter().all(|r| r.get(*name) == first)
    });
    if let Some(pos) = columns.iter().position(|c| *c == "id") {
        let id = columns.remove(pos);
        columns.insert(0, id);
    }
    out.push('{');
    if !every.is_empty() {
        out.push_str("\"every\":{");
        for (i, name) in every.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&Value::from(*name).to_string());
            out.push(':');
            let value = records.first().and_then(|r| r.get(*name));
            write_compact(value.unwrap_or(&Value::Null), out, tables);
        }
        out.push_str("},");
    }
    out.push_str("\"columns\":");
    out.push_str(&Value::from(columns.clone()).to_string());
    out.push_str(",\"rows\":[");
    for (i, record) in records.iter().enumerate() {
        out.push_str(if i > 0 { ",\n" } else { "\n" });
        out.push('[');
        for (j, c) in columns.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            write_compact(record.get(*c).unwrap_or(&Value::Null), out, tables);
        }
        out.push(']');
    }
    out.push_str("]}");
}

/// Two or more objects, none holding a list of objects (those stay nested records).
fn is_table(items: &[Value]) -> bool {
    items.len() >= 2
        && items.iter().all(|item| {
            item.as_object().is_some_and(|o| {
                o.values()
                    .all(|v| !v.as_array().is_some_and(|a| a.iter().any(Value::is_object)))
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_of_records_becomes_one_table_and_loses_nothing() {
        let v = json!({"mailbox": "m", "messages": [
            {"id": "a", "subject": "x", "folderId": "INBOX", "isFlagged": true},
            {"id": "b", "subject": "y", "folderId": "INBOX"},
        ]});
        let (text, tables) = payload(&v);
        assert!(tables);
        assert_eq!(
            text,
            "{\"mailbox\":\"m\",\"messages\":{\"every\":{\"folderId\":\"INBOX\"},\
             \"columns\":[\"id\",\"isFlagged\",\"subject\"],\"rows\":[\n\
             [\"a\",true,\"x\"],\n[\"b\",null,\"y\"]]}}"
        );
        // Each field name once, however many records.
        assert_eq!(text.matches("subject").count(), 1);
    }

    #[test]
    fn nested_lists_single_records_and_scalars_stay_json() {
        let v = json!({"results": [
            {"mailbox": "a", "messages": [{"id": "1"}, {"id": "2"}]},
            {"mailbox": "b", "messages": []},
        ], "one": [{"id": "x"}], "tags": ["p", "q"], "quote": "say \"hi\"\n"});
        let (text, tables) = payload(&v);
        assert!(tables, "the inner message list is a table");
        // The outer list holds lists of records, so it stays a list of objects.
        assert!(text.starts_with(
            "{\"one\":[{\"id\":\"x\"}],\"quote\":\"say \\\"hi\\\"\\n\",\"results\":[{"
        ));
        assert!(text.contains("\"tags\":[\"p\",\"q\"]"));
        let (plain, tables) = payload(&json!({"mailboxes": ["a", "b"]}));
        assert!(!tables);
        assert_eq!(plain, "{\"mailboxes\":[\"a\",\"b\"]}");
    }
}
