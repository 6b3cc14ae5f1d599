//! Fuzz entry point `env_gates`: a config selector byte plus `KEY=VALUE` lines →
//! `Gates::resolve`, checked against a reference model of the gate rules. Compiled only under
//! `cfg(fuzzing)`.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use super::config::CONFIG_BASE;

use crate::address::EmailAddress;
use crate::config::env::Env;
use crate::config::{Access, Config};
use crate::gates::{
    ALLOW_HANDOFFS_VAR, ALLOW_SEND_VAR, ALLOW_WRITES_VAR, ALLOWED_RECIPIENT_DOMAINS_VAR,
    ALLOWED_SENDERS_VAR, Gate, Gates, HTTP_ALLOW_NO_AUTH_VAR, SEND_FROM_VAR, SEND_MAX_PER_HOUR_VAR,
    SendRefusal,
};

// ----------------------------------------------------------------------------------------------
// env_gates
// ----------------------------------------------------------------------------------------------

/// The credential variables the first mailbox's `smtp` block may name.
const SMTP_PASSWORD_VAR: &str = "FINANCE_SMTP_PASSWORD";
const SMTP_TOKEN_VAR: &str = "FINANCE_SMTP_TOKEN";
/// The first mailbox's `smtp.rateLimit.smtpPerHour`, when the selector asks for one.
const SMTP_PER_HOUR_LIMIT: u32 = 5;

/// The variables the gates read, in the order a one-digit key (`0`..`9`) names them.
const GATE_VARS: [&str; 10] = [
    ALLOW_WRITES_VAR,
    ALLOW_HANDOFFS_VAR,
    ALLOW_SEND_VAR,
    SEND_FROM_VAR,
    ALLOWED_SENDERS_VAR,
    ALLOWED_RECIPIENT_DOMAINS_VAR,
    HTTP_ALLOW_NO_AUTH_VAR,
    SEND_MAX_PER_HOUR_VAR,
    SMTP_PASSWORD_VAR,
    SMTP_TOKEN_VAR,
];

/// At most this many `KEY=VALUE` lines are read from one input.
const MAX_ENV_LINES: usize = 16;

/// The fixed mailboxes of the env_gates config: alias, address as written in the file.
const GATE_MAILBOXES: [(&str, &str); 2] = [
    ("finance", "Finance@Example.com"),
    ("support", "support@example.org"),
];

/// Fuzzes [`Gates::resolve`] with arbitrary environments against a fixed, valid config.
///
/// Input: the first byte selects the config (bit 0: `allowWrites`; bit 1: a second mailbox;
/// bit 2: the second mailbox is `access: read`; bit 3: the first is; bits 4-6: the first
/// mailbox has an `smtp` block naming `passwordEnv` (bit 4) or `oauth2TokenEnv` (bit 4 and 6),
/// with `rateLimit.smtpPerHour` 5 (bit 5)). The rest is read as text, up to 16 lines of
/// `KEY=VALUE` (value up to the end of the line, unchanged); `KEY` is a variable name or one
/// digit naming a variable in [`GATE_VARS`] order. A later line wins over an earlier one; lines
/// without `=` are skipped.
///
/// Oracles: an independent reference model of the gate rules (strict booleans
/// true/1/yes/on and false/0/no/off, trimmed, ASCII case-insensitive, blank = unset; list
/// parsing; the strict send cap; the send rules in order, then the SMTP credential) predicts
/// acceptance, the exact refusal and every resolved value; an open send gate always has `from`
/// allowlisted with `full` access and listed in the allowed senders, a non-empty list of valid
/// recipient domains and a cap within 1..=1000; its `Debug` never shows the credential; `Gates::is_open`
/// (all the catalog asks) opens exactly the families whose gates the model opens.
pub fn env_gates(data: &[u8]) {
    let Some((&selector, text)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(text);
    let mut pairs: BTreeMap<String, String> = BTreeMap::new();
    for line in text.split('\n').take(MAX_ENV_LINES) {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = match key.as_bytes() {
            [digit @ b'0'..=b'9'] => GATE_VARS[usize::from(digit - b'0')].to_owned(),
            _ => key.to_owned(),
        };
        pairs.insert(key, value.to_owned());
    }

    let shape = GateConfig::from_selector(selector);
    let config = Config::from_json(shape.json().as_bytes(), Path::new(CONFIG_BASE))
        .expect("invariant: the env_gates config is valid");
    let env = Env::from_pairs(pairs.clone());
    let actual = Gates::resolve(&env, &config);
    let expected = model::resolve(&shape, &pairs);

    match (actual, expected) {
        (Ok(gates), Ok(model)) => {
            assert_eq!(
                gates.writes, model.writes,
                "oracle: writes gate as modelled"
            );
            assert_eq!(
                gates.handoffs, model.handoffs,
                "oracle: handoffs gate as modelled"
            );
            match (&gates.send, &model.send) {
                (None, None) => {}
                (Some(send), Some(expected)) => {
                    assert_eq!(send.from.as_str(), expected.from, "oracle: send from");
                    assert_eq!(
                        send.from_alias.as_str(),
                        expected.from_alias,
                        "oracle: send alias"
                    );
                    let senders: Vec<&str> = send
                        .allowed_senders
                        .iter()
                        .map(EmailAddress::as_str)
                        .collect();
                    assert_eq!(senders, expected.senders, "oracle: allowed senders");
                    let domains: Vec<&str> =
                        send.recipient_domains.iter().map(|d| d.as_str()).collect();
                    assert_eq!(domains, expected.domains, "oracle: recipient domains");
                    assert_eq!(
                        send.recipient_domains_defaulted, expected.defaulted,
                        "oracle: recipient domains defaulted"
                    );
                    assert_eq!(send.max_per_hour, expected.max_per_hour, "oracle: send cap");
                    assert_eq!(
                        send.smtp_secret.as_ref().map(|s| s.expose()),
                        expected.secret.as_deref(),
                        "oracle: smtp credential"
                    );
                    check_secret_redacted(send);
                }
                (actual, expected) => panic!(
                    "oracle: send gate open = {} but the model says {}",
                    actual.is_some(),
                    expected.is_some()
                ),
            }
            check_gate_invariants(&gates, &config);
            check_open_gates(&gates, &model);
        }
        (Err(error), Err(refusal)) => {
            let matches = match (&error, &refusal) {
                (
                    crate::config::ConfigError::NotBoolean { var },
                    model::Refusal::NotBoolean(want),
                )
                | (
                    crate::config::ConfigError::InvalidAddress { var },
                    model::Refusal::InvalidAddress(want),
                )
                | (
                    crate::config::ConfigError::EmptyList { var },
                    model::Refusal::EmptyList(want),
                ) => var == want,
                (
                    crate::config::ConfigError::InvalidEntries { var, count },
                    model::Refusal::InvalidEntries(want, want_count),
                ) => var == want && count == want_count,
                (crate::config::ConfigError::Send(got), model::Refusal::Send(want)) => got == want,
                _ => false,
            };
            assert!(
                matches,
                "oracle: refusal {error:?} but the model predicts {refusal:?}"
            );
        }
        (Ok(gates), Err(refusal)) => {
            panic!("oracle: accepted ({gates:?}) but the model predicts {refusal:?}")
        }
        (Err(error), Ok(model)) => {
            panic!("oracle: refused ({error:?}) but the model accepts ({model:?})")
        }
    }
}

/// Which of the fixed mailboxes exist and how they are configured.
#[derive(Clone, Copy, Debug)]
struct GateConfig {
    allow_writes: bool,
    two_mailboxes: bool,
    second_read: bool,
    first_read: bool,
    /// The credential variable the first mailbox's `smtp` block names.
    smtp_credential: Option<&'static str>,
    /// The first mailbox's `smtp.rateLimit.smtpPerHour`.
    smtp_per_hour: Option<u32>,
}

impl GateConfig {
    fn from_selector(selector: u8) -> Self {
        let bit = |n: u8| selector & (1 << n) != 0;
        GateConfig {
            allow_writes: bit(0),
            two_mailboxes: bit(1),
            second_read: bit(2),
            first_read: bit(3),
            smtp_credential: match (bit(4), bit(6)) {
                (false, _) => None,
                (true, false) => Some(SMTP_PASSWORD_VAR),
                (true, true) => Some(SMTP_TOKEN_VAR),
            },
            smtp_per_hour: bit(5).then_some(SMTP_PER_HOUR_LIMIT),
        }
    }

    /// (alias, address as written, read-only) for every mailbox in the config.
    fn mailboxes(&self) -> Vec<(&'static str, &'static str, bool)> {
        let (first_alias, first_address) = GATE_MAILBOXES[0];
        let (second_alias, second_address) = GATE_MAILBOXES[1];
        let mut out = vec![(first_alias, first_address, self.first_read)];
        if self.two_mailboxes {
            out.push((second_alias, second_address, self.second_read));
        }
        out
    }

    fn json(&self) -> String {
        let entries: Vec<String> = self
            .mailboxes()
            .into_iter()
            .enumerate()
            .map(|(index, (alias, address, read))| {
                let access = if read { "read" } else { "full" };
                let backend = if index == 0 {
                    self.smtp_backend_json()
                } else {
                    String::new()
                };
                format!(
                    r#"{{"alias": "{alias}", "address": "{address}", "access": "{access}"{backend}}}"#
                )
            })
            .collect();
        format!(
            r#"{{"mailboxes": [{}], "allowWrites": {}}}"#,
            entries.join(", "),
            self.allow_writes
        )
    }

    /// `, "backend": {...}` with the first mailbox's `smtp` block, or nothing.
    fn smtp_backend_json(&self) -> String {
        if self.smtp_credential.is_none() && self.smtp_per_hour.is_none() {
            return String::new();
        }
        let mut smtp = r#""host": "127.0.0.1", "port": 2525, "security": "plain""#.to_owned();
        match self.smtp_credential {
            Some(SMTP_TOKEN_VAR) => {
                smtp.push_str(&format!(r#", "oauth2TokenEnv": "{SMTP_TOKEN_VAR}""#))
            }
            Some(var) => smtp.push_str(&format!(r#", "passwordEnv": "{var}""#)),
            None => {}
        }
        if let Some(per_hour) = self.smtp_per_hour {
            smtp.push_str(&format!(r#", "rateLimit": {{"smtpPerHour": {per_hour}}}"#));
        }
        format!(
            r#", "backend": {{"kind": "maildir", "path": "/srv/mail/finance", "smtp": {{{smtp}}}}}"#
        )
    }
}

/// The credential never shows in `Debug`: whenever the secret has a character that neither the
/// rest of the output nor the redaction marker has, it cannot appear by coincidence.
fn check_secret_redacted(send: &crate::gates::SendSettings) {
    let Some(secret) = &send.smtp_secret else {
        return;
    };
    let secret = secret.expose();
    let full = format!("{send:?}");
    let mut without = send.clone();
    without.smtp_secret = None;
    let rest = format!("{without:?}{:?}", send.smtp_secret);
    if secret.chars().any(|c| !rest.contains(c)) {
        assert!(
            !full.contains(secret),
            "oracle: the smtp credential never appears in Debug output"
        );
    }
}

/// Invariants of an open send gate that hold whatever the model says.
fn check_gate_invariants(gates: &Gates, config: &Config) {
    let Some(send) = &gates.send else {
        return;
    };
    let mailbox = config
        .mailboxes
        .iter()
        .find(|entry| entry.address == send.from)
        .expect("oracle: the send address is an allowlisted mailbox");
    assert_eq!(
        mailbox.alias, send.from_alias,
        "oracle: from_alias is its alias"
    );
    assert_eq!(
        mailbox.access,
        Access::Full,
        "oracle: the sender has full access"
    );
    assert!(
        send.allowed_senders.contains(&send.from),
        "oracle: the allowed senders contain the send address"
    );
    assert!(
        !send.recipient_domains.is_empty(),
        "oracle: an open send gate has recipient domains"
    );
    for domain in &send.recipient_domains {
        assert!(
            model::bare_domain(domain.as_str()).as_deref() == Some(domain.as_str()),
            "oracle: every recipient domain is a valid lower-case domain"
        );
    }
    assert!(
        (1..=1_000).contains(&send.max_per_hour),
        "oracle: the send cap is within 1..=1000"
    );
    if send.recipient_domains_defaulted {
        assert_eq!(
            send.recipient_domains,
            vec![send.from.to_domain()],
            "oracle: the default recipient domain is the sender's own"
        );
    }
    let unique: HashSet<_> = send.allowed_senders.iter().collect();
    assert_eq!(
        unique.len(),
        send.allowed_senders.len(),
        "oracle: allowed senders are deduplicated"
    );
    let unique: HashSet<_> = send.recipient_domains.iter().collect();
    assert_eq!(
        unique.len(),
        send.recipient_domains.len(),
        "oracle: recipient domains are deduplicated"
    );
}

/// The gates hand the catalog exactly the families the model opens: `tools::catalog::build`
/// asks `Gates::is_open` and nothing else, and its unit test
/// `eight_catalogs_have_the_specified_counts` (main crate) checks the served families for all
/// eight combinations, so checking `is_open` here covers the catalog without the tool layer.
fn check_open_gates(gates: &Gates, model: &model::Resolved) {
    assert_eq!(
        gates.is_open(Gate::Handoffs),
        model.handoffs,
        "oracle: the handoff family is served exactly when the model opens its gate"
    );
    assert_eq!(
        gates.is_open(Gate::Writes),
        model.writes,
        "oracle: the write family is served exactly when the model opens its gate"
    );
    assert_eq!(
        gates.is_open(Gate::Send),
        model.send.is_some(),
        "oracle: the send family (the only outbound tools) is served exactly when the model \
         opens its gate"
    );
}

/// The reference model of `gates::resolve`, written from the spec (security.md §1–2), not from
/// the code. The one primitive it borrows is the RFC 5322 address parser, and only for entries
/// its own conservative classifier cannot decide (see [`model::address`]).
mod model {
    use std::collections::BTreeMap;

    use super::{
        ALLOW_HANDOFFS_VAR, ALLOW_SEND_VAR, ALLOW_WRITES_VAR, ALLOWED_RECIPIENT_DOMAINS_VAR,
        ALLOWED_SENDERS_VAR, EmailAddress, GateConfig, HTTP_ALLOW_NO_AUTH_VAR, SEND_FROM_VAR,
        SEND_MAX_PER_HOUR_VAR, SendRefusal,
    };

    /// `MAILGATE_SEND_MAX_PER_HOUR` when unset, and its largest value (security.md).
    const DEFAULT_CAP: u32 = 20;
    const MAX_CAP: u32 = 1_000;

    /// What the model expects `resolve` to return on success.
    #[derive(Debug)]
    pub(super) struct Resolved {
        pub(super) writes: bool,
        pub(super) handoffs: bool,
        pub(super) send: Option<Send>,
    }

    #[derive(Debug)]
    pub(super) struct Send {
        pub(super) from: String,
        pub(super) from_alias: &'static str,
        pub(super) senders: Vec<String>,
        pub(super) domains: Vec<String>,
        pub(super) defaulted: bool,
        pub(super) max_per_hour: u32,
        pub(super) secret: Option<String>,
    }

    /// The refusal the model expects, by variable.
    #[derive(Debug)]
    pub(super) enum Refusal {
        NotBoolean(&'static str),
        InvalidAddress(&'static str),
        EmptyList(&'static str),
        InvalidEntries(&'static str, usize),
        Send(SendRefusal),
    }

    pub(super) fn resolve(
        config: &GateConfig,
        env: &BTreeMap<String, String>,
    ) -> Result<Resolved, Refusal> {
        let get = |var: &str| env.get(var).map(String::as_str);
        // The gate variables first, in the documented order, then the HTTP switch.
        let handoffs = boolean(ALLOW_HANDOFFS_VAR, get(ALLOW_HANDOFFS_VAR))?;
        let writes = boolean(ALLOW_WRITES_VAR, get(ALLOW_WRITES_VAR))?;
        let send_on = boolean(ALLOW_SEND_VAR, get(ALLOW_SEND_VAR))?;
        boolean(HTTP_ALLOW_NO_AUTH_VAR, get(HTTP_ALLOW_NO_AUTH_VAR))?;

        // The sender variables are validated even with the gate closed.
        let from = match get(SEND_FROM_VAR).map(str::trim).filter(|v| !v.is_empty()) {
            None => None,
            Some(value) => Some(address(value).ok_or(Refusal::InvalidAddress(SEND_FROM_VAR))?),
        };
        let senders = list(ALLOWED_SENDERS_VAR, get(ALLOWED_SENDERS_VAR), address)?;
        let domains = list(
            ALLOWED_RECIPIENT_DOMAINS_VAR,
            get(ALLOWED_RECIPIENT_DOMAINS_VAR),
            |entry| bare_domain(entry.strip_prefix('@').unwrap_or(entry)),
        )?;
        let cap = send_cap(get(SEND_MAX_PER_HOUR_VAR))?;

        let send = if send_on == Some(true) {
            let from = from.ok_or(Refusal::Send(SendRefusal::FromMissing))?;
            let (alias, _, read) = config
                .mailboxes()
                .into_iter()
                .find(|(_, address, _)| address.eq_ignore_ascii_case(&from))
                .ok_or(Refusal::Send(SendRefusal::FromNotAllowlisted))?;
            if read {
                return Err(Refusal::Send(SendRefusal::FromReadOnly));
            }
            let senders = senders.ok_or(Refusal::Send(SendRefusal::SendersMissing))?;
            if !senders.contains(&from) {
                return Err(Refusal::Send(SendRefusal::SendersDoNotCoverFrom));
            }
            let (domains, defaulted) = match domains {
                Some(domains) => (domains, false),
                None => {
                    let own = from
                        .rsplit_once('@')
                        .map(|(_, domain)| domain.to_owned())
                        .unwrap_or_default();
                    (vec![own], true)
                }
            };
            // Only the first mailbox has an `smtp` block; another sender has no credential and
            // no smtp rate limit.
            let first = alias == super::GATE_MAILBOXES[0].0;
            // The sender's SMTP credential, exact (untrimmed), when its block names one.
            let secret = match config.smtp_credential.filter(|_| first) {
                None => None,
                Some(var) => Some(
                    get(var)
                        .filter(|value| !value.is_empty())
                        .map(str::to_owned)
                        .ok_or(Refusal::Send(SendRefusal::SmtpSecretMissing))?,
                ),
            };
            Some(Send {
                from,
                from_alias: alias,
                senders,
                domains,
                defaulted,
                max_per_hour: config
                    .smtp_per_hour
                    .filter(|_| first)
                    .map_or(cap, |limit| limit.min(cap)),
                secret,
            })
        } else {
            None
        };
        Ok(Resolved {
            writes: writes.unwrap_or(config.allow_writes),
            handoffs: handoffs == Some(true),
            send,
        })
    }

    /// The send cap: blank (after trimming) is the default; otherwise the plain decimal digits
    /// of a number from 1 to 1000, without sign or leading zero.
    fn send_cap(value: Option<&str>) -> Result<u32, Refusal> {
        let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(DEFAULT_CAP);
        };
        let refused = Refusal::Send(SendRefusal::BadSendCap);
        if value.starts_with('0') || !value.bytes().all(|b| b.is_ascii_digit()) {
            return Err(refused);
        }
        let number = value.bytes().try_fold(0_u32, |n, b| {
            n.checked_mul(10)?.checked_add(u32::from(b - b'0'))
        });
        match number {
            Some(cap) if (1..=MAX_CAP).contains(&cap) => Ok(cap),
            _ => Err(refused),
        }
    }

    /// The spelling table: blank (after trimming) is unset.
    fn boolean(var: &'static str, value: Option<&str>) -> Result<Option<bool>, Refusal> {
        const TRUE: [&str; 4] = ["true", "1", "yes", "on"];
        const FALSE: [&str; 4] = ["false", "0", "no", "off"];
        let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        if TRUE.iter().any(|s| s.eq_ignore_ascii_case(value)) {
            Ok(Some(true))
        } else if FALSE.iter().any(|s| s.eq_ignore_ascii_case(value)) {
            Ok(Some(false))
        } else {
            Err(Refusal::NotBoolean(var))
        }
    }

    /// A comma list: unset or exactly empty is `None`; otherwise the trimmed, non-empty entries,
    /// each valid, deduplicated in order, and at least one of them.
    fn list(
        var: &'static str,
        raw: Option<&str>,
        parse: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Vec<String>>, Refusal> {
        let Some(raw) = raw.filter(|raw| !raw.is_empty()) else {
            return Ok(None);
        };
        let entries: Vec<&str> = raw
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .collect();
        if entries.is_empty() {
            return Err(Refusal::EmptyList(var));
        }
        let mut out = Vec::new();
        let mut invalid = 0;
        for entry in entries {
            match parse(entry) {
                Some(item) if !out.contains(&item) => out.push(item),
                Some(_) => {}
                None => invalid += 1,
            }
        }
        if invalid > 0 {
            return Err(Refusal::InvalidEntries(var, invalid));
        }
        Ok(Some(out))
    }

    /// A DNS domain per the spec: ASCII, at most 253 characters, at least two labels of 1-63
    /// characters `[a-z0-9-]` (case-insensitive) not starting or ending with `-`, top-level label
    /// not all digits. Returns it lower-cased.
    pub(super) fn bare_domain(s: &str) -> Option<String> {
        if s.is_empty() || s.len() > 253 || !s.is_ascii() {
            return None;
        }
        let lower = s.to_ascii_lowercase();
        let labels: Vec<&str> = lower.split('.').collect();
        let label_ok = |label: &&str| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        };
        let tld_numeric = labels
            .last()
            .is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit()));
        (labels.len() >= 2 && labels.iter().all(label_ok) && !tld_numeric).then_some(lower)
    }

    /// An address, lower-cased, or `None` when invalid. The model decides on its own whenever
    /// the spec is unambiguous: refused characters, not exactly one `@`, an empty local part or
    /// an invalid domain are invalid; a simple dot-atom local part (`[A-Za-z0-9+_-]` runs joined
    /// by single dots, at most 64 characters) with a valid domain is valid. Everything in
    /// between (exotic RFC 5322 atext) is left to the real parser, and the model checks that its
    /// answer is at least consistent with the rest of the spec.
    fn address(s: &str) -> Option<String> {
        const REFUSED: &str = "<>\"\\/?#%[]()";
        if s.is_empty() || s.len() > 254 || !s.is_ascii() {
            return None;
        }
        if s.chars()
            .any(|c| c.is_ascii_whitespace() || c.is_ascii_control() || REFUSED.contains(c))
        {
            return None;
        }
        let (local, domain) = s.split_once('@')?;
        if local.is_empty() || domain.contains('@') {
            return None;
        }
        bare_domain(domain)?;
        let simple = local.len() <= 64
            && local.split('.').all(|run| {
                !run.is_empty()
                    && run
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'_' | b'-'))
            });
        let real = EmailAddress::parse(s).ok();
        if simple {
            assert!(
                real.is_some(),
                "oracle: a simple dot-atom address with a valid domain is accepted"
            );
            return Some(s.to_ascii_lowercase());
        }
        real.map(|address| {
            assert_eq!(
                address.as_str(),
                s.to_ascii_lowercase(),
                "oracle: an accepted address is the input, lower-cased"
            );
            address.as_str().to_owned()
        })
    }
}
