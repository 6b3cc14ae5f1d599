//! OData query handling of the fake Graph: percent coding, `$select`, the `$filter` subset the
//! client uses, `$orderby`, and the KQL-lite `$search` matcher. Pure functions, no state.

use chrono::{DateTime, Utc};

/// Decodes `%XX` escapes (and, for form bodies, `+` as space). Invalid escapes stay as they are,
/// as a lenient server would.
pub(crate) fn percent_decode(input: &str, plus_is_space: bool) -> String {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encodes everything but RFC 3986 unreserved characters, as Graph writes the query of
/// its nextLinks (`%24top=10`).
pub(crate) fn percent_encode(input: &str) -> String {
    let mut out = String::with_capacity(input.len());
    for b in input.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Parses an `application/x-www-form-urlencoded` body into ordered pairs.
pub(crate) fn parse_form(body: &str) -> Vec<(String, String)> {
    body.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k, true), percent_decode(v, true))
        })
        .collect()
}

/// One clause of the `$filter` subset.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Clause {
    ReceivedGe(DateTime<Utc>),
    ReceivedLe(DateTime<Utc>),
    IsRead(bool),
    HasAttachments(bool),
}

impl Clause {
    /// The property the clause restricts, for Graph's `$orderby`-in-`$filter` rule.
    pub(crate) fn property(&self) -> &'static str {
        match self {
            Clause::ReceivedGe(_) | Clause::ReceivedLe(_) => "receivedDateTime",
            Clause::IsRead(_) => "isRead",
            Clause::HasAttachments(_) => "hasAttachments",
        }
    }
}

/// Parses `a and b and c`; `None` for anything outside the subset.
pub(crate) fn parse_filter(filter: &str) -> Option<Vec<Clause>> {
    let mut clauses = Vec::new();
    for raw in filter.split(" and ") {
        let parts: Vec<&str> = raw.split_whitespace().collect();
        let [prop, op, value] = parts.as_slice() else {
            return None;
        };
        let clause = match (*prop, *op) {
            ("receivedDateTime", "ge" | "le") => {
                let at = DateTime::parse_from_rfc3339(value)
                    .ok()?
                    .with_timezone(&Utc);
                if *op == "ge" {
                    Clause::ReceivedGe(at)
                } else {
                    Clause::ReceivedLe(at)
                }
            }
            ("isRead", "eq") => Clause::IsRead(parse_bool(value)?),
            ("hasAttachments", "eq") => Clause::HasAttachments(parse_bool(value)?),
            _ => return None,
        };
        clauses.push(clause);
    }
    Some(clauses)
}

fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// One `$orderby` key: the property and whether it is descending.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OrderKey {
    pub(crate) property: String,
    pub(crate) descending: bool,
}

/// Parses `prop [asc|desc], ...`; only the date properties sort. `None` when malformed.
pub(crate) fn parse_orderby(orderby: &str) -> Option<Vec<OrderKey>> {
    let mut keys = Vec::new();
    for item in orderby.split(',') {
        let parts: Vec<&str> = item.split_whitespace().collect();
        let (property, descending) = match parts.as_slice() {
            [p] => (*p, false),
            [p, "asc"] => (*p, false),
            [p, "desc"] => (*p, true),
            _ => return None,
        };
        if !matches!(
            property,
            "receivedDateTime" | "sentDateTime" | "isRead" | "hasAttachments"
        ) {
            return None;
        }
        keys.push(OrderKey {
            property: property.to_owned(),
            descending,
        });
    }
    Some(keys)
}

/// Graph's documented restriction: with both `$filter` and `$orderby`, the `$orderby`
/// properties must appear in `$filter`, in the same order, before any other property.
pub(crate) fn orderby_fits_filter(order: &[OrderKey], clauses: &[Clause]) -> bool {
    let mut filter_props: Vec<&str> = Vec::new();
    for c in clauses {
        if filter_props.last() != Some(&c.property()) {
            filter_props.push(c.property());
        }
    }
    order
        .iter()
        .enumerate()
        .all(|(i, key)| filter_props.get(i) == Some(&key.property.as_str()))
}

/// One term of a KQL-lite query: words or a phrase, optionally restricted to a property.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Term {
    pub(crate) field: Option<String>,
    pub(crate) text: String,
}

/// Parses a `$search` value: it must be double-quoted as a whole; inside, `\"...\"` (or a bare
/// nested `"..."`) is a phrase, other words stand alone, `prop:value` restricts to `subject`,
/// `from`, `to`, `body` or `attachment`, and the `AND` keyword is ignored. `None` when the value
/// is not quoted.
pub(crate) fn parse_search(value: &str) -> Option<Vec<Term>> {
    let inner = value.strip_prefix('"')?.strip_suffix('"')?;
    let inner = inner.replace("\\\"", "\"");
    let mut terms = Vec::new();
    let mut chars = inner.chars().peekable();
    let mut word = String::new();
    let flush = |word: &mut String, terms: &mut Vec<Term>| {
        if !word.is_empty() && word != "AND" {
            let (field, text) = match word.split_once(':') {
                Some((f, t))
                    if matches!(
                        f.to_ascii_lowercase().as_str(),
                        "subject" | "from" | "to" | "body" | "attachment"
                    ) =>
                {
                    (Some(f.to_ascii_lowercase()), t.trim_matches('"').to_owned())
                }
                _ => (None, word.clone()),
            };
            if !text.is_empty() {
                terms.push(Term { field, text });
            }
        }
        word.clear();
    };
    while let Some(c) = chars.next() {
        if c == '"' {
            let mut phrase = String::new();
            for p in chars.by_ref() {
                if p == '"' {
                    break;
                }
                phrase.push(p);
            }
            if word.ends_with(':') {
                word.push_str(&phrase);
                flush(&mut word, &mut terms);
            } else {
                flush(&mut word, &mut terms);
                let phrase = phrase.trim().to_owned();
                if !phrase.is_empty() {
                    terms.push(Term {
                        field: None,
                        text: phrase,
                    });
                }
            }
        } else if c.is_whitespace() {
            flush(&mut word, &mut terms);
        } else {
            word.push(c);
        }
    }
    flush(&mut word, &mut terms);
    Some(terms)
}

/// The searchable text of one message, lower-cased per field.
pub(crate) struct Haystack {
    pub(crate) subject: String,
    pub(crate) body: String,
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) attachments: String,
}

impl Haystack {
    /// Every term must occur (case-insensitively) in its field, or in any default field.
    pub(crate) fn matches(&self, terms: &[Term]) -> bool {
        terms.iter().all(|t| {
            let needle = t.text.to_lowercase();
            match t.field.as_deref() {
                Some("subject") => self.subject.contains(&needle),
                Some("from") => self.from.contains(&needle),
                Some("to") => self.to.contains(&needle),
                Some("body") => self.body.contains(&needle),
                Some("attachment") => self.attachments.contains(&needle),
                _ => {
                    self.subject.contains(&needle)
                        || self.body.contains(&needle)
                        || self.from.contains(&needle)
                        || self.attachments.contains(&needle)
                }
            }
        })
    }
}

/// Strips tags and decodes the common entities: what Graph does for
/// `outlook.body-content-type="text"`, close enough for tests.
pub(crate) fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    let mut tag = String::new();
    let mut skip_until: Option<&str> = None;
    for c in html.chars() {
        if in_tag {
            if c == '>' {
                in_tag = false;
                let name = tag
                    .trim_start_matches('/')
                    .split(|ch: char| ch.is_whitespace() || ch == '/')
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase();
                let closing = tag.starts_with('/');
                if let Some(end) = skip_until {
                    if closing && name == end {
                        skip_until = None;
                    }
                } else if !closing && (name == "script" || name == "style") {
                    skip_until = Some(if name == "script" { "script" } else { "style" });
                } else if matches!(
                    name.as_str(),
                    "br" | "p" | "div" | "li" | "tr" | "h1" | "h2"
                ) {
                    out.push('\n');
                }
                tag.clear();
            } else {
                tag.push(c);
            }
        } else if c == '<' {
            in_tag = true;
        } else if skip_until.is_none() {
            out.push(c);
        }
    }
    out.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
        .trim()
        .to_owned()
}
