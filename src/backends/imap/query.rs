//! IMAP `UID SEARCH` criteria, built from structured keys (issue 12: no caller string reaches the
//! wire unquoted, CR/LF impossible). [`Criteria::to_arguments`] is the only way search text is
//! made: every string becomes an RFC 3501 `quoted` (`"` and `\` escaped with `\`), and a
//! string holding any control character (CR, LF, NUL, the rest of C0, DEL, C1) is refused with
//! [`QueryError::ControlChar`], never stripped. Non-ASCII strings are sent as UTF-8 inside the
//! quoted string with `CHARSET UTF-8` in front of the whole argument list (RFC 3501 allows only
//! 7-bit in `quoted`, but Dovecot and the servers we target accept 8-bit there with a UTF-8
//! charset, as RFC 6855 makes standard): a literal would cost a continuation round trip per
//! string, or LITERAL+, and async-imap sends a command as one line. `NOT` and `OR` take exactly
//! one key per operand, so the prefix form is unambiguous and no parentheses are needed. The
//! arguments are at most [`MAX_ARGUMENT_BYTES`], keys nest at most [`MAX_DEPTH`] deep, and a
//! UID set must be non-empty, non-zero and strictly ascending (`Key::uids` makes one), so
//! that the test and fuzz oracle `parse_arguments` gives back exactly the same criteria.
//! [`quote`] is the same quoting for the mailbox names of hand-written commands (STATUS,
//! APPEND, MOVE), which are modified UTF-7 on the wire and so must be ASCII. Called by the IMAP
//! backend only.

use std::fmt::Write as _;

use chrono::Datelike as _;

/// The longest argument list `to_arguments` returns, in bytes: far above any real search, far
/// below the line lengths servers refuse (Dovecot allows 64 KiB).
pub(crate) const MAX_ARGUMENT_BYTES: usize = 8 * 1024;

/// How deep keys may nest: a top-level key is at depth 1, the operand of `NOT` one deeper.
pub(crate) const MAX_DEPTH: usize = 16;

/// Put in front of the arguments when a string holds non-ASCII text.
const CHARSET_UTF8: &str = "CHARSET UTF-8 ";

/// RFC 3501 `date-month`.
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// One search key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    /// `TEXT "…"`: header or body contains.
    Text(String),
    /// `SUBJECT "…"`.
    Subject(String),
    /// `FROM "…"`.
    From(String),
    /// `HEADER Message-ID "…"`.
    MessageId(String),
    /// `SINCE d-Mon-yyyy` (internal date on or after the day).
    Since(chrono::NaiveDate),
    /// `BEFORE d-Mon-yyyy` (internal date before the day).
    Before(chrono::NaiveDate),
    Seen,
    Unseen,
    /// `UID set`, from UIDs: non-empty, non-zero, strictly ascending (see [`Key::uids`]).
    #[cfg(any(test, fuzzing))]
    Uids(Vec<u32>),
    #[cfg(any(test, fuzzing))]
    Not(Box<Key>),
    #[cfg(any(test, fuzzing))]
    Or(Box<Key>, Box<Key>),
}

/// Keys that must all match; none is `ALL`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Criteria {
    pub(crate) keys: Vec<Key>,
}

/// Why criteria cannot be put on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum QueryError {
    #[error("a search string holds a control character (CR, LF, NUL or another)")]
    ControlChar,
    #[error("a mailbox name holds a non-ASCII character (encode it as modified UTF-7 first)")]
    NonAscii,
    #[error("the search is longer than {MAX_ARGUMENT_BYTES} bytes")]
    TooLong,
    #[error("search keys nest deeper than {MAX_DEPTH}")]
    TooDeep,
    #[cfg(any(test, fuzzing))]
    #[error("a UID set is empty")]
    EmptyUidSet,
    #[cfg(any(test, fuzzing))]
    #[error("a UID set holds UID 0")]
    ZeroUid,
    #[cfg(any(test, fuzzing))]
    #[error("a UID set is not strictly ascending")]
    UidsNotAscending,
    #[error("a search date's year is outside 0000-9999")]
    DateOutOfRange,
}

#[cfg(test)]
impl Key {
    /// `UID` of these UIDs in any order, sorted and deduplicated as [`Key::Uids`] needs.
    pub(crate) fn uids(uids: impl IntoIterator<Item = u32>) -> Self {
        let mut uids: Vec<u32> = uids.into_iter().collect();
        uids.sort_unstable();
        uids.dedup();
        Self::Uids(uids)
    }
}

impl Criteria {
    /// The arguments of `UID SEARCH` (the text after `UID SEARCH `): one line of at most
    /// [`MAX_ARGUMENT_BYTES`], every string quoted, `CHARSET UTF-8 ` first when a string is
    /// not ASCII.
    pub(crate) fn to_arguments(&self) -> Result<String, QueryError> {
        if self.keys.is_empty() {
            return Ok("ALL".to_owned());
        }
        let mut writer = Writer {
            out: String::new(),
            non_ascii: false,
        };
        for (index, key) in self.keys.iter().enumerate() {
            if index > 0 {
                writer.out.push(' ');
            }
            writer.key(key, 1)?;
        }
        let mut line = writer.out;
        if writer.non_ascii {
            line.insert_str(0, CHARSET_UTF8);
        }
        if line.len() > MAX_ARGUMENT_BYTES {
            return Err(QueryError::TooLong);
        }
        Ok(line)
    }
}

/// `value` as an IMAP quoted string, for a mailbox name (already modified UTF-7, so ASCII) in a
/// hand-written command. Refuses control characters, non-ASCII and values over
/// [`MAX_ARGUMENT_BYTES`].
pub(crate) fn quote(value: &str) -> Result<String, QueryError> {
    if !value.is_ascii() {
        return Err(QueryError::NonAscii);
    }
    if value.len() > MAX_ARGUMENT_BYTES {
        return Err(QueryError::TooLong);
    }
    let mut out = String::with_capacity(value.len() + 2);
    push_quoted(value, &mut out)?;
    Ok(out)
}

/// A UID sequence set for `uids` (e.g. `1:3,7,9:10`): ascending, each run of consecutive UIDs
/// as one range. Order and duplicates in `uids` do not matter (a sorted, deduplicated copy is
/// compressed), so the same UIDs always give the same text. `uids` must be non-empty and hold
/// no 0 (server UIDs are `nz-number`): this returns text, not a `Result`, so it cannot refuse
/// them; `Key::Uids` through [`Criteria::to_arguments`] checks both.
pub(crate) fn uid_set(uids: &[u32]) -> String {
    let mut sorted = uids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = String::new();
    let mut iter = sorted.into_iter();
    let Some(first) = iter.next() else {
        return out;
    };
    let (mut start, mut end) = (first, first);
    for uid in iter {
        if end.checked_add(1) == Some(uid) {
            end = uid;
        } else {
            push_range(start, end, &mut out);
            out.push(',');
            (start, end) = (uid, uid);
        }
    }
    push_range(start, end, &mut out);
    out
}

fn push_range(start: u32, end: u32, out: &mut String) {
    // Writing to a String cannot fail.
    let _ = if start == end {
        write!(out, "{start}")
    } else {
        write!(out, "{start}:{end}")
    };
}

/// Appends `value` as an RFC 3501 `quoted`; refuses control characters.
fn push_quoted(value: &str, out: &mut String) -> Result<(), QueryError> {
    out.push('"');
    for c in value.chars() {
        if c.is_control() {
            return Err(QueryError::ControlChar);
        }
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    Ok(())
}

/// RFC 3501 `date-text`: the day without a leading zero, the English month, a 4-digit year.
fn push_date(date: chrono::NaiveDate, out: &mut String) -> Result<(), QueryError> {
    let year = date.year();
    if !(0..=9999).contains(&year) {
        return Err(QueryError::DateOutOfRange);
    }
    let month = MONTHS[date.month0() as usize];
    let _ = write!(out, "{}-{month}-{year:04}", date.day());
    Ok(())
}

/// The argument text being built, and whether a string in it is not ASCII.
struct Writer {
    out: String,
    non_ascii: bool,
}

impl Writer {
    fn key(&mut self, key: &Key, depth: usize) -> Result<(), QueryError> {
        if depth > MAX_DEPTH {
            return Err(QueryError::TooDeep);
        }
        match key {
            Key::Text(value) => self.string("TEXT ", value)?,
            Key::Subject(value) => self.string("SUBJECT ", value)?,
            Key::From(value) => self.string("FROM ", value)?,
            Key::MessageId(value) => self.string("HEADER Message-ID ", value)?,
            Key::Since(date) => {
                self.out.push_str("SINCE ");
                push_date(*date, &mut self.out)?;
            }
            Key::Before(date) => {
                self.out.push_str("BEFORE ");
                push_date(*date, &mut self.out)?;
            }
            Key::Seen => self.out.push_str("SEEN"),
            Key::Unseen => self.out.push_str("UNSEEN"),
            #[cfg(any(test, fuzzing))]
            Key::Uids(uids) => {
                if uids.is_empty() {
                    return Err(QueryError::EmptyUidSet);
                }
                if uids.contains(&0) {
                    return Err(QueryError::ZeroUid);
                }
                if uids.windows(2).any(|pair| pair[0] >= pair[1]) {
                    return Err(QueryError::UidsNotAscending);
                }
                self.out.push_str("UID ");
                self.out.push_str(&uid_set(uids));
            }
            #[cfg(any(test, fuzzing))]
            Key::Not(inner) => {
                self.out.push_str("NOT ");
                self.key(inner, depth + 1)?;
            }
            #[cfg(any(test, fuzzing))]
            Key::Or(left, right) => {
                self.out.push_str("OR ");
                self.key(left, depth + 1)?;
                self.out.push(' ');
                self.key(right, depth + 1)?;
            }
        }
        // Stop early on a huge search instead of building all of it first.
        if self.out.len() > MAX_ARGUMENT_BYTES {
            return Err(QueryError::TooLong);
        }
        Ok(())
    }

    fn string(&mut self, name: &str, value: &str) -> Result<(), QueryError> {
        // The quoted value is at least this long: refuse before copying a huge value.
        if self.out.len() + name.len() + value.len() + 2 > MAX_ARGUMENT_BYTES {
            return Err(QueryError::TooLong);
        }
        self.out.push_str(name);
        push_quoted(value, &mut self.out)?;
        self.non_ascii |= !value.is_ascii();
        Ok(())
    }
}

/// Parses exactly the grammar [`Criteria::to_arguments`] emits, and nothing else: the test and
/// fuzz oracle (build → parse back → the same criteria). `None` for anything else, including a
/// `CHARSET UTF-8 ` prefix without a non-ASCII string or the reverse, a non-canonical UID set
/// or date, and nesting deeper than [`MAX_DEPTH`]. A UID range is expanded in full, so this is
/// for the builder's own output only (whose UIDs already were in memory), never server text.
#[cfg(any(test, fuzzing))]
pub(crate) fn parse_arguments(line: &str) -> Option<Criteria> {
    let (charset, body) = match line.strip_prefix(CHARSET_UTF8) {
        Some(body) => (true, body),
        None => (false, line),
    };
    if body == "ALL" {
        return (!charset).then(Criteria::default);
    }
    let mut parser = Parser {
        rest: body,
        non_ascii: false,
    };
    let mut keys = Vec::new();
    loop {
        keys.push(parser.key(1)?);
        if parser.rest.is_empty() {
            break;
        }
        parser.rest = parser.rest.strip_prefix(' ')?;
    }
    (parser.non_ascii == charset).then_some(Criteria { keys })
}

#[cfg(any(test, fuzzing))]
struct Parser<'a> {
    rest: &'a str,
    non_ascii: bool,
}

#[cfg(any(test, fuzzing))]
impl<'a> Parser<'a> {
    fn key(&mut self, depth: usize) -> Option<Key> {
        if depth > MAX_DEPTH {
            return None;
        }
        let key = match self.atom() {
            "TEXT" => Key::Text(self.spaced_quoted()?),
            "SUBJECT" => Key::Subject(self.spaced_quoted()?),
            "FROM" => Key::From(self.spaced_quoted()?),
            "HEADER" => {
                self.rest = self.rest.strip_prefix(" Message-ID")?;
                Key::MessageId(self.spaced_quoted()?)
            }
            "SINCE" => Key::Since(self.spaced_date()?),
            "BEFORE" => Key::Before(self.spaced_date()?),
            "SEEN" => Key::Seen,
            "UNSEEN" => Key::Unseen,
            "UID" => {
                self.space()?;
                Key::Uids(parse_uid_set(self.atom())?)
            }
            "NOT" => {
                self.space()?;
                Key::Not(Box::new(self.key(depth + 1)?))
            }
            "OR" => {
                self.space()?;
                let left = self.key(depth + 1)?;
                self.space()?;
                let right = self.key(depth + 1)?;
                Key::Or(Box::new(left), Box::new(right))
            }
            _ => return None,
        };
        Some(key)
    }

    /// Everything up to the next space or the end.
    fn atom(&mut self) -> &'a str {
        let end = self.rest.find(' ').unwrap_or(self.rest.len());
        let (atom, rest) = self.rest.split_at(end);
        self.rest = rest;
        atom
    }

    fn space(&mut self) -> Option<()> {
        self.rest = self.rest.strip_prefix(' ')?;
        Some(())
    }

    fn spaced_quoted(&mut self) -> Option<String> {
        self.space()?;
        let mut chars = self.rest.strip_prefix('"')?.char_indices();
        let mut value = String::new();
        while let Some((index, c)) = chars.next() {
            match c {
                '"' => {
                    // +1 for the opening quote, +1 for the closing one.
                    self.rest = &self.rest[index + 2..];
                    self.non_ascii |= !value.is_ascii();
                    return Some(value);
                }
                '\\' => match chars.next()? {
                    (_, escaped @ ('"' | '\\')) => value.push(escaped),
                    _ => return None,
                },
                c if c.is_control() => return None,
                c => value.push(c),
            }
        }
        None
    }

    fn spaced_date(&mut self) -> Option<chrono::NaiveDate> {
        self.space()?;
        let mut parts = self.atom().split('-');
        let (day, month, year) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || !(1..=2).contains(&day.len()) || year.len() != 4 {
            return None;
        }
        let day = parse_nz_number(day)?;
        let month = MONTHS.iter().position(|name| *name == month)?;
        if !year.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let year: i32 = year.parse().ok()?;
        chrono::NaiveDate::from_ymd_opt(year, u32::try_from(month).ok()? + 1, day)
    }
}

/// A canonical UID set: ascending ranges `n` or `n:m` (`m > n`), never touching each other.
#[cfg(any(test, fuzzing))]
fn parse_uid_set(set: &str) -> Option<Vec<u32>> {
    let mut uids: Vec<u32> = Vec::new();
    for range in set.split(',') {
        let (start, end) = match range.split_once(':') {
            Some((start, end)) => {
                let (start, end) = (parse_nz_number(start)?, parse_nz_number(end)?);
                (end > start).then_some((start, end))?
            }
            None => {
                let uid = parse_nz_number(range)?;
                (uid, uid)
            }
        };
        if let Some(&last) = uids.last()
            && start <= last.checked_add(1)?
        {
            return None;
        }
        uids.extend(start..=end);
    }
    Some(uids)
}

/// RFC 3501 `nz-number` that fits a `u32`: digits, no leading zero.
#[cfg(any(test, fuzzing))]
fn parse_nz_number(text: &str) -> Option<u32> {
    if text.starts_with('0') || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The oracle of the `imap_query` fuzz target and the property tests: `to_arguments` refuses
/// exactly when [`refusal_reasons`] finds a reason, and then with one of them; an accepted
/// line is one line of at most [`MAX_ARGUMENT_BYTES`] without control characters, equals an
/// independent rendering, has the `CHARSET` prefix exactly when a string is not ASCII, and
/// parses back to the same criteria. Panics with `oracle: …` on a violation.
#[cfg(any(test, fuzzing))]
pub(crate) fn check_criteria(criteria: &Criteria) {
    let reasons = refusal_reasons(criteria);
    match criteria.to_arguments() {
        Ok(line) => {
            assert!(
                reasons.is_empty(),
                "oracle: accepted despite {reasons:?}: {line:?}"
            );
            assert!(
                !line.chars().any(char::is_control),
                "oracle: a control character on the wire: {line:?}"
            );
            assert!(line.len() <= MAX_ARGUMENT_BYTES, "oracle: over the bound");
            assert_eq!(
                line,
                reference::render(criteria),
                "oracle: the line differs from the reference rendering"
            );
            assert_eq!(
                line.starts_with(CHARSET_UTF8),
                reference::any_non_ascii(criteria),
                "oracle: CHARSET exactly for non-ASCII: {line:?}"
            );
            assert_eq!(
                parse_arguments(&line).as_ref(),
                Some(criteria),
                "oracle: parsing the line back gives other criteria: {line:?}"
            );
        }
        Err(error) => assert!(
            reasons.contains(&error),
            "oracle: refused with {error:?}, but the reasons are {reasons:?}"
        ),
    }
}

/// Every reason `criteria` cannot go on the wire, found without the builder.
#[cfg(any(test, fuzzing))]
pub(crate) fn refusal_reasons(criteria: &Criteria) -> Vec<QueryError> {
    fn walk(key: &Key, depth: usize, reasons: &mut Vec<QueryError>) {
        if depth > MAX_DEPTH {
            reasons.push(QueryError::TooDeep);
        }
        match key {
            Key::Text(value) | Key::Subject(value) | Key::From(value) | Key::MessageId(value) => {
                if value.chars().any(char::is_control) {
                    reasons.push(QueryError::ControlChar);
                }
            }
            Key::Since(date) | Key::Before(date) => {
                if date.year() < 0 || date.year() > 9999 {
                    reasons.push(QueryError::DateOutOfRange);
                }
            }
            Key::Seen | Key::Unseen => {}
            Key::Uids(uids) => {
                if uids.is_empty() {
                    reasons.push(QueryError::EmptyUidSet);
                }
                if uids.contains(&0) {
                    reasons.push(QueryError::ZeroUid);
                }
                if !uids.is_sorted() || uids.iter().skip(1).zip(uids).any(|(b, a)| a == b) {
                    reasons.push(QueryError::UidsNotAscending);
                }
            }
            Key::Not(inner) => walk(inner, depth + 1, reasons),
            Key::Or(left, right) => {
                walk(left, depth + 1, reasons);
                walk(right, depth + 1, reasons);
            }
        }
    }
    let mut reasons = Vec::new();
    for key in &criteria.keys {
        walk(key, 1, &mut reasons);
    }
    if reference::render(criteria).len() > MAX_ARGUMENT_BYTES {
        reasons.push(QueryError::TooLong);
    }
    reasons
}

/// A second, deliberately plain rendering (string replacement, `format!`), for the oracle.
#[cfg(any(test, fuzzing))]
mod reference {
    use super::{Criteria, Key};
    use chrono::Datelike as _;

    pub(super) fn render(criteria: &Criteria) -> String {
        if criteria.keys.is_empty() {
            return "ALL".to_owned();
        }
        let body: Vec<String> = criteria.keys.iter().map(key).collect();
        let prefix = if any_non_ascii(criteria) {
            "CHARSET UTF-8 "
        } else {
            ""
        };
        format!("{prefix}{}", body.join(" "))
    }

    pub(super) fn any_non_ascii(criteria: &Criteria) -> bool {
        fn non_ascii(key: &Key) -> bool {
            match key {
                Key::Text(v) | Key::Subject(v) | Key::From(v) | Key::MessageId(v) => !v.is_ascii(),
                Key::Not(inner) => non_ascii(inner),
                Key::Or(left, right) => non_ascii(left) || non_ascii(right),
                _ => false,
            }
        }
        criteria.keys.iter().any(non_ascii)
    }

    fn key(key: &Key) -> String {
        let quoted = |v: &str| format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
        let date = |d: &chrono::NaiveDate| {
            let month = d.format("%b").to_string();
            format!("{}-{month}-{:04}", d.day(), d.year())
        };
        match key {
            Key::Text(v) => format!("TEXT {}", quoted(v)),
            Key::Subject(v) => format!("SUBJECT {}", quoted(v)),
            Key::From(v) => format!("FROM {}", quoted(v)),
            Key::MessageId(v) => format!("HEADER Message-ID {}", quoted(v)),
            Key::Since(d) => format!("SINCE {}", date(d)),
            Key::Before(d) => format!("BEFORE {}", date(d)),
            Key::Seen => "SEEN".to_owned(),
            Key::Unseen => "UNSEEN".to_owned(),
            Key::Uids(uids) => format!("UID {}", set(uids)),
            Key::Not(inner) => format!("NOT {}", self::key(inner)),
            Key::Or(l, r) => format!("OR {} {}", self::key(l), self::key(r)),
        }
    }

    /// Ranges found by looking at each UID's neighbours (not by the builder's running range).
    fn set(uids: &[u32]) -> String {
        let mut parts = Vec::new();
        let mut index = 0;
        while index < uids.len() {
            let mut last = index;
            while last + 1 < uids.len() && uids[last].checked_add(1) == Some(uids[last + 1]) {
                last += 1;
            }
            parts.push(if last == index {
                uids[index].to_string()
            } else {
                format!("{}:{}", uids[index], uids[last])
            });
            index = last + 1;
        }
        parts.join(",")
    }
}

/// Criteria from fuzz bytes, without `arbitrary`: a count byte, then per key a tag byte and
/// its payload; bytes past the end read as 0. Strings are raw bytes (lossy UTF-8, so quotes,
/// backslashes, controls and non-ASCII all occur), or one 8-byte chunk repeated up to 3,200
/// times to reach the length bound; UID sets are either generated ascending runs (possibly
/// starting at 0, possibly empty) or raw words (unsorted, duplicated, 0); dates span years
/// about -1100 to 10100; nesting goes 4 past [`MAX_DEPTH`].
#[cfg(any(test, fuzzing))]
pub(crate) fn criteria_from_bytes(data: &[u8]) -> Criteria {
    let mut bytes = Bytes { data };
    let count = usize::from(bytes.byte() % 5);
    let keys = (0..count).map(|_| bytes.key(1)).collect();
    Criteria { keys }
}

#[cfg(any(test, fuzzing))]
struct Bytes<'a> {
    data: &'a [u8],
}

#[cfg(any(test, fuzzing))]
impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&first, rest)) => {
                self.data = rest;
                first
            }
            None => 0,
        }
    }

    fn word(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    fn take(&mut self, len: usize) -> &[u8] {
        let (taken, rest) = self.data.split_at(len.min(self.data.len()));
        self.data = rest;
        taken
    }

    fn string(&mut self) -> String {
        let len = self.byte();
        if len >= 0xf0 {
            let chunk = String::from_utf8_lossy(self.take(8)).into_owned();
            chunk.repeat(usize::from(len - 0xef) * 200)
        } else {
            String::from_utf8_lossy(self.take(usize::from(len))).into_owned()
        }
    }

    fn date(&mut self) -> chrono::NaiveDate {
        let days = i32::try_from(self.word() % 4_100_000).unwrap_or(0) - 400_000;
        chrono::NaiveDate::from_num_days_from_ce_opt(days).unwrap_or_default()
    }

    fn uids(&mut self) -> Vec<u32> {
        if self.byte().is_multiple_of(2) {
            let mut uid = self.word() % 1_000_000;
            let count = usize::from(self.byte()) * 9;
            let gaps = self.byte();
            let mut uids = Vec::with_capacity(count);
            for index in 0..count {
                uids.push(uid);
                // Gaps of 1 (a run), 2 and 3, in a pattern the byte picks.
                let gap = 1 + (index * usize::from(gaps) / 7) % 3;
                match uid.checked_add(u32::try_from(gap).unwrap_or(1)) {
                    Some(next) => uid = next,
                    None => break,
                }
            }
            uids
        } else {
            let count = self.byte() % 8;
            (0..count).map(|_| self.word() % 64).collect()
        }
    }

    fn key(&mut self, depth: usize) -> Key {
        let tag = self.byte() % 11;
        let nest = depth < MAX_DEPTH + 4;
        match tag {
            0 => Key::Text(self.string()),
            1 => Key::Subject(self.string()),
            2 => Key::From(self.string()),
            3 => Key::MessageId(self.string()),
            4 => Key::Since(self.date()),
            5 => Key::Before(self.date()),
            6 => Key::Seen,
            7 => Key::Unseen,
            8 => Key::Uids(self.uids()),
            9 if nest => Key::Not(Box::new(self.key(depth + 1))),
            10 if nest => Key::Or(Box::new(self.key(depth + 1)), Box::new(self.key(depth + 1))),
            _ => Key::Seen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn day(y: i32, m: u32, d: u32) -> chrono::NaiveDate {
        chrono::NaiveDate::from_ymd_opt(y, m, d).unwrap()
    }

    fn args(keys: Vec<Key>) -> Result<String, QueryError> {
        Criteria { keys }.to_arguments()
    }

    fn line(keys: Vec<Key>) -> String {
        let criteria = Criteria { keys };
        let line = criteria.to_arguments().unwrap();
        assert_eq!(parse_arguments(&line).as_ref(), Some(&criteria), "{line}");
        line
    }

    #[test]
    fn no_keys_is_all() {
        assert_eq!(line(vec![]), "ALL");
    }

    #[test]
    fn each_key_has_its_wire_form() {
        assert_eq!(line(vec![Key::Text("a b".into())]), r#"TEXT "a b""#);
        assert_eq!(line(vec![Key::Subject("Q3".into())]), r#"SUBJECT "Q3""#);
        assert_eq!(
            line(vec![Key::From("ann@example.com".into())]),
            r#"FROM "ann@example.com""#
        );
        assert_eq!(
            line(vec![Key::MessageId("<1@example.org>".into())]),
            r#"HEADER Message-ID "<1@example.org>""#
        );
        assert_eq!(line(vec![Key::Since(day(1994, 2, 1))]), "SINCE 1-Feb-1994");
        assert_eq!(
            line(vec![Key::Before(day(2026, 12, 31))]),
            "BEFORE 31-Dec-2026"
        );
        assert_eq!(line(vec![Key::Since(day(7, 5, 9))]), "SINCE 9-May-0007");
        assert_eq!(line(vec![Key::Seen]), "SEEN");
        assert_eq!(line(vec![Key::Unseen]), "UNSEEN");
        assert_eq!(
            line(vec![Key::Uids(vec![1, 2, 3, 7, 9, 10])]),
            "UID 1:3,7,9:10"
        );
        assert_eq!(line(vec![Key::Not(Box::new(Key::Seen))]), "NOT SEEN");
        assert_eq!(
            line(vec![Key::Or(
                Box::new(Key::Subject("x".into())),
                Box::new(Key::Not(Box::new(Key::Seen)))
            )]),
            r#"OR SUBJECT "x" NOT SEEN"#
        );
        assert_eq!(
            line(vec![
                Key::Unseen,
                Key::Since(day(2026, 1, 5)),
                Key::Text("y".into())
            ]),
            r#"UNSEEN SINCE 5-Jan-2026 TEXT "y""#
        );
    }

    #[test]
    fn quotes_and_backslashes_are_escaped() {
        assert_eq!(line(vec![Key::Text("a\"b".into())]), r#"TEXT "a\"b""#);
        assert_eq!(line(vec![Key::Text("a\\b".into())]), r#"TEXT "a\\b""#);
        assert_eq!(
            line(vec![Key::Text("\\\"\" \\".into())]),
            r#"TEXT "\\\"\" \\""#
        );
        assert_eq!(line(vec![Key::Text(String::new())]), r#"TEXT """#);
        // A string that tries to close the quote and add a key stays one string.
        assert_eq!(
            line(vec![Key::Subject("x\" OR ALL \"".into())]),
            r#"SUBJECT "x\" OR ALL \"""#
        );
    }

    #[test]
    fn non_ascii_adds_the_charset() {
        assert_eq!(
            line(vec![Key::Seen, Key::Subject("Grüße \"台北\"".into())]),
            "CHARSET UTF-8 SEEN SUBJECT \"Grüße \\\"台北\\\"\""
        );
        assert_eq!(
            line(vec![Key::Not(Box::new(Key::From(
                "zoë@example.com".into()
            )))]),
            "CHARSET UTF-8 NOT FROM \"zoë@example.com\""
        );
    }

    #[test]
    fn control_characters_are_refused() {
        for value in [
            "a\rb",
            "a\nb",
            "\r\n",
            "a\0",
            "\t",
            "\u{1b}[0m",
            "\u{7f}",
            "\u{85}",
        ] {
            for key in [
                Key::Text(value.into()),
                Key::Subject(value.into()),
                Key::From(value.into()),
                Key::MessageId(value.into()),
            ] {
                let nested = Key::Or(Box::new(Key::Seen), Box::new(Key::Not(Box::new(key))));
                assert_eq!(
                    args(vec![nested]),
                    Err(QueryError::ControlChar),
                    "{value:?}"
                );
            }
        }
    }

    #[test]
    fn limits_are_typed_errors() {
        let long = "x".repeat(MAX_ARGUMENT_BYTES);
        assert_eq!(args(vec![Key::Text(long)]), Err(QueryError::TooLong));
        // Exactly at the bound is fine: `TEXT "` + x… + `"`.
        let fits = "x".repeat(MAX_ARGUMENT_BYTES - 7);
        assert_eq!(line(vec![Key::Text(fits)]).len(), MAX_ARGUMENT_BYTES);
        // The CHARSET prefix counts.
        let too_long_with_charset = format!("é{}", "x".repeat(MAX_ARGUMENT_BYTES - 9));
        assert_eq!(
            args(vec![Key::Text(too_long_with_charset)]),
            Err(QueryError::TooLong)
        );
        // Many short keys add up.
        let many = vec![Key::Unseen; MAX_ARGUMENT_BYTES / 7 + 1];
        assert_eq!(args(many), Err(QueryError::TooLong));
        let scattered: Vec<u32> = (1..=3000).map(|n| n * 2).collect();
        assert_eq!(args(vec![Key::Uids(scattered)]), Err(QueryError::TooLong));

        let mut deep = Key::Seen;
        for _ in 0..MAX_DEPTH - 1 {
            deep = Key::Not(Box::new(deep));
        }
        assert_eq!(
            line(vec![deep.clone()]).matches("NOT").count(),
            MAX_DEPTH - 1
        );
        let too_deep = Key::Or(Box::new(Key::Seen), Box::new(deep));
        assert_eq!(args(vec![too_deep]), Err(QueryError::TooDeep));

        assert_eq!(args(vec![Key::Uids(vec![])]), Err(QueryError::EmptyUidSet));
        assert_eq!(args(vec![Key::Uids(vec![0, 1])]), Err(QueryError::ZeroUid));
        assert_eq!(
            args(vec![Key::Uids(vec![2, 1])]),
            Err(QueryError::UidsNotAscending)
        );
        assert_eq!(
            args(vec![Key::Uids(vec![1, 1])]),
            Err(QueryError::UidsNotAscending)
        );
        assert_eq!(
            args(vec![Key::Since(day(10_000, 1, 1))]),
            Err(QueryError::DateOutOfRange)
        );
        assert_eq!(
            args(vec![Key::Before(day(-1, 1, 1))]),
            Err(QueryError::DateOutOfRange)
        );
    }

    #[test]
    fn uid_set_compresses_runs() {
        assert_eq!(uid_set(&[1, 2, 3, 7, 9, 10]), "1:3,7,9:10");
        assert_eq!(uid_set(&[10, 9, 7, 3, 2, 1, 2]), "1:3,7,9:10");
        assert_eq!(uid_set(&[5]), "5");
        assert_eq!(uid_set(&[4_294_967_294, u32::MAX]), "4294967294:4294967295");
        assert_eq!(uid_set(&[]), "");
        assert_eq!(Key::uids([3, 1, 2, 3]), Key::Uids(vec![1, 2, 3]));
    }

    #[test]
    fn quote_is_for_ascii_mailbox_names() {
        assert_eq!(quote("INBOX").unwrap(), r#""INBOX""#);
        assert_eq!(quote("a\"b\\c").unwrap(), r#""a\"b\\c""#);
        assert_eq!(quote("").unwrap(), r#""""#);
        assert_eq!(quote("~peter/&U,BTFw-").unwrap(), r#""~peter/&U,BTFw-""#);
        assert_eq!(quote("a\r\nb"), Err(QueryError::ControlChar));
        assert_eq!(quote("a\0"), Err(QueryError::ControlChar));
        assert_eq!(quote("a\tb"), Err(QueryError::ControlChar));
        assert_eq!(quote("台北"), Err(QueryError::NonAscii));
        assert_eq!(
            quote(&"x".repeat(MAX_ARGUMENT_BYTES + 1)),
            Err(QueryError::TooLong)
        );
    }

    #[test]
    fn the_parser_refuses_what_the_builder_never_emits() {
        for text in [
            "",
            "ALL ",
            "CHARSET UTF-8 ALL",
            "CHARSET UTF-8 SEEN",
            "SUBJECT \"é\"",
            "SEEN ",
            " SEEN",
            "SEEN  UNSEEN",
            "TEXT abc",
            "TEXT \"abc",
            "TEXT \"a\\b\"",
            "TEXT \"a\rb\"",
            "SINCE 01-Feb-1994",
            "SINCE 1-feb-1994",
            "SINCE 1-Feb-94",
            "SINCE 31-Feb-1994",
            "UID 0",
            "UID 1,2",
            "UID 1:1",
            "UID 3:1",
            "UID 1:3,2",
            "UID 01",
            "UID 4294967296",
            "HEADER Subject \"x\"",
            "OR SEEN",
            "NOT",
            "(SEEN)",
        ] {
            assert_eq!(parse_arguments(text), None, "{text:?}");
        }
    }

    #[test]
    fn fuzz_decoder_reaches_every_outcome() {
        // The fuzz target's decoder can build accepted criteria and each refusal.
        let accepted = criteria_from_bytes(&[1, 1, 3, b'a', b'"', b'\\']);
        assert_eq!(accepted.to_arguments().unwrap(), r#"SUBJECT "a\"\\""#);
        let control = criteria_from_bytes(&[1, 0, 1, b'\r']);
        assert_eq!(control.to_arguments(), Err(QueryError::ControlChar));
        let long = criteria_from_bytes(&[1, 0, 0xff, b'x', b'y', b'z', b'"', 1, 2, 3, 4]);
        assert_eq!(long.to_arguments(), Err(QueryError::TooLong));
        let mut nested = vec![1];
        nested.extend([9; 20]);
        let nested = criteria_from_bytes(&nested);
        assert_eq!(nested.to_arguments(), Err(QueryError::TooDeep));
        let zero = criteria_from_bytes(&[1, 8, 0, 0, 0, 0, 0, 3, 0]);
        assert_eq!(zero.to_arguments(), Err(QueryError::ZeroUid));
        for data in [
            &[1, 0, 1, b'\r'][..],
            &[1, 0, 0xff],
            &nested_bytes(),
            &[3, 8, 0, 0, 8, 1],
        ] {
            check_criteria(&criteria_from_bytes(data));
        }
    }

    fn nested_bytes() -> Vec<u8> {
        let mut data = vec![2, 10, 9, 6];
        data.extend([9; 30]);
        data
    }

    /// Characters that stress quoting: quotes, backslashes, controls, non-ASCII, plain text.
    fn search_char() -> impl Strategy<Value = char> {
        prop_oneof![
            4 => proptest::char::range(' ', '~'),
            2 => Just('"'),
            2 => Just('\\'),
            1 => prop_oneof![Just('\r'), Just('\n'), Just('\0')],
            1 => proptest::char::range('\u{0}', '\u{1f}'),
            1 => Just('\u{7f}'),
            2 => any::<char>(),
        ]
    }

    fn search_string() -> impl Strategy<Value = String> {
        prop_oneof![
            20 => proptest::collection::vec(search_char(), 0..12)
                .prop_map(|chars| chars.into_iter().collect::<String>()),
            1 => (0..2 * MAX_ARGUMENT_BYTES).prop_map(|len| "x".repeat(len)),
        ]
    }

    fn date() -> impl Strategy<Value = chrono::NaiveDate> {
        (-400_000..3_700_000_i32)
            .prop_map(|days| chrono::NaiveDate::from_num_days_from_ce_opt(days).unwrap())
    }

    fn uids() -> impl Strategy<Value = Vec<u32>> {
        prop_oneof![
            4 => proptest::collection::btree_set(1..40_u32, 1..12)
                .prop_map(|set| set.into_iter().collect()),
            1 => proptest::collection::btree_set(any::<u32>(), 1..4)
                .prop_map(|set| set.into_iter().filter(|uid| *uid != 0).collect()),
            1 => proptest::collection::vec(0..8_u32, 0..5),
        ]
    }

    fn key() -> impl Strategy<Value = Key> {
        let leaf = prop_oneof![
            search_string().prop_map(Key::Text),
            search_string().prop_map(Key::Subject),
            search_string().prop_map(Key::From),
            search_string().prop_map(Key::MessageId),
            date().prop_map(Key::Since),
            date().prop_map(Key::Before),
            Just(Key::Seen),
            Just(Key::Unseen),
            uids().prop_map(Key::Uids),
        ];
        let tree = leaf.prop_recursive(MAX_DEPTH as u32 + 3, 48, 2, |inner| {
            prop_oneof![
                inner.clone().prop_map(|k| Key::Not(Box::new(k))),
                (inner.clone(), inner).prop_map(|(l, r)| Key::Or(Box::new(l), Box::new(r))),
            ]
        });
        // Random trees seldom reach the depth bound: chains of NOT around a tree do, on both
        // sides of it.
        let chain = (tree.clone(), MAX_DEPTH - 4..MAX_DEPTH + 2).prop_map(|(mut key, nots)| {
            for _ in 0..nots {
                key = Key::Not(Box::new(key));
            }
            key
        });
        prop_oneof![4 => tree, 1 => chain]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Refused exactly when a reason exists; otherwise one clean line that parses back.
        #[test]
        fn arguments_are_one_line_that_parses_back(
            keys in proptest::collection::vec(key(), 0..5),
        ) {
            check_criteria(&Criteria { keys });
        }

        #[test]
        fn fuzz_bytes_hold_the_oracle(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            check_criteria(&criteria_from_bytes(&data));
        }

        #[test]
        fn quote_refuses_or_quotes(value in proptest::collection::vec(search_char(), 0..12)) {
            let value: String = value.into_iter().collect();
            match quote(&value) {
                Ok(quoted) => {
                    prop_assert!(value.is_ascii() && !value.chars().any(char::is_control));
                    let parsed = parse_arguments(&format!("TEXT {quoted}"));
                    prop_assert_eq!(parsed, Some(Criteria { keys: vec![Key::Text(value)] }));
                }
                Err(QueryError::ControlChar) => {
                    prop_assert!(value.chars().any(char::is_control));
                }
                Err(QueryError::NonAscii) => prop_assert!(!value.is_ascii()),
                Err(other) => prop_assert!(false, "unexpected {other:?}"),
            }
        }
    }
}
