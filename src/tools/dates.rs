//! ISO-8601 date parsing for search criteria. A date alone means its first instant (for a lower
//! bound) or its last (for an upper bound); a date-time without a zone is read as UTC.

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};

/// `d` as the reference writes timestamps: RFC 3339 in UTC with a `Z`, whole seconds
/// (`2026-07-01T08:00:00Z`, never `+00:00`).
pub(crate) fn iso_z(d: DateTime<Utc>) -> String {
    d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[derive(Debug, thiserror::Error)]
#[error("not a valid ISO-8601 date")]
pub(crate) struct DateError;

/// `end_of_day` picks 23:59:59.999 for a bare date (an inclusive upper bound).
pub(crate) fn parse(value: &str, end_of_day: bool) -> Result<DateTime<Utc>, DateError> {
    let value = value.trim();
    if let Ok(d) = NaiveDate::parse_from_str(value, "%Y-%m-%d") {
        let t = if end_of_day {
            NaiveTime::from_hms_milli_opt(23, 59, 59, 999).ok_or(DateError)?
        } else {
            NaiveTime::MIN
        };
        return Ok(Utc.from_utc_datetime(&d.and_time(t)));
    }
    let normalised = value.replacen(' ', "T", 1);
    if let Ok(dt) = DateTime::parse_from_rfc3339(&normalised) {
        return Ok(dt.with_timezone(&Utc));
    }
    // Zones written without a colon (+0100) and zone-less times.
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f%z", "%Y-%m-%dT%H:%M%z"] {
        if let Ok(dt) = DateTime::parse_from_str(&normalised, fmt) {
            return Ok(dt.with_timezone(&Utc));
        }
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(&normalised, fmt) {
            return Ok(Utc.from_utc_datetime(&dt));
        }
    }
    Err(DateError)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_reference_shapes() {
        for ok in [
            "2026-05-01",
            "2026-05-01T10:00",
            "2026-05-01T10:00:00",
            "2026-05-01T10:00:00.123Z",
            "2026-05-01 10:00:00+01:00",
            "2026-05-01T10:00:00+0100",
        ] {
            assert!(parse(ok, false).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_impossible_dates() {
        for bad in ["2026-13-01", "2026-02-30", "2026-05-01T25:00", "yesterday"] {
            assert!(parse(bad, false).is_err(), "{bad}");
        }
    }

    #[test]
    fn bare_dates_cover_the_whole_day() {
        let from = parse("2026-05-01", false).unwrap();
        let to = parse("2026-05-01", true).unwrap();
        assert_eq!((to - from).num_milliseconds(), 86_399_999);
    }
}
