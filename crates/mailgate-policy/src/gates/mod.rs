//! Gates: which tool families this process serves, decided once at startup.
//!
//! Invariants (security.md §1–2, reference §11):
//! - Three independent gates. The environment is authoritative: `PLUGIN_ALLOW_WRITES` decides
//!   writes whenever it is set (either way) and only when it is absent or blank does the file's
//!   `allowWrites` apply; handoffs and send are environment-only (`…=true`), with no file key.
//! - Booleans are strict ([`parse_bool`]): any spelling other than true/1/yes/on or
//!   false/0/no/off aborts startup naming the variable. The gate variables are checked in
//!   [`Gate::ALL`] order, so the first bad one is the one reported.
//! - Send fails closed: the gate only opens with a fully configured sender ([`SendSettings`]):
//!   `OUTLOOK_SEND_FROM` names an allowlisted mailbox with `full` access, and a non-empty
//!   `OUTLOOK_ALLOWED_SENDERS` covers it. Without `OUTLOOK_ALLOWED_RECIPIENT_DOMAINS` the
//!   recipients are confined to the sender's own domain. The sender and recipient lists and the
//!   send cap (`MAILGATE_SEND_MAX_PER_HOUR`, a whole number 1–1000, default 20) are validated
//!   whenever they are set, even with the gate closed, so a typo surfaces at once.
//! - When the sending mailbox has an `smtp` block naming a credential variable (`passwordEnv` or
//!   `oauth2TokenEnv`), that variable must be set once the gate opens; its value is kept as a
//!   [`Secret`] (never formatted) and handed to the SMTP transport by startup.
//! - A [`Gates`] value is never mutated after startup (it is built here and read elsewhere).
//!
//! Who may call it: startup (`startup::load_settings`) resolves; the catalog and the tools read.

use crate::address::{AddressError, Domain, EmailAddress};
use crate::alias::Alias;
use crate::config::env::{Env, Secret};
use crate::config::{Access, BackendSpec, Config, ConfigError};

// The gate variables' names, the refusal type and the strict boolean live in `config`, which
// owns every variable name and `ConfigError`; they are re-exported so callers keep saying
// `gates::…`. Gates depend on config, never the reverse (issue 10, clean layering).
pub(crate) use crate::config::{
    ALLOW_HANDOFFS_VAR, ALLOW_SEND_VAR, ALLOW_WRITES_VAR, ALLOWED_RECIPIENT_DOMAINS_VAR,
    ALLOWED_SENDERS_VAR, HTTP_ALLOW_NO_AUTH_VAR, SEND_FROM_VAR, SEND_MAX_PER_HOUR_VAR, SendRefusal,
    parse_bool,
};

/// The cap when [`SEND_MAX_PER_HOUR_VAR`] is unset.
pub(crate) const DEFAULT_SEND_MAX_PER_HOUR: u32 = 20;
/// The largest cap an operator may set: beyond this the gateway is a bulk mailer.
pub(crate) const MAX_SEND_MAX_PER_HOUR: u32 = 1000;

/// A gate. Matched exhaustively elsewhere, so adding one breaks the catalog build until wired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Gate {
    Handoffs,
    Writes,
    Send,
}

impl Gate {
    /// Every gate, in the order their variables are validated.
    pub(crate) const ALL: [Gate; 3] = [Gate::Handoffs, Gate::Writes, Gate::Send];

    /// The environment variable that opens this gate.
    pub fn env_var(self) -> &'static str {
        match self {
            Gate::Handoffs => ALLOW_HANDOFFS_VAR,
            Gate::Writes => ALLOW_WRITES_VAR,
            Gate::Send => ALLOW_SEND_VAR,
        }
    }
}

/// The resolved gates.
#[derive(Clone, Debug)]
pub struct Gates {
    pub writes: bool,
    pub handoffs: bool,
    /// `Some` exactly when the send gate is open.
    pub send: Option<SendSettings>,
}

/// The outbound configuration in force when the send gate is open.
#[derive(Clone, Debug)]
pub struct SendSettings {
    /// The alias of the sending mailbox (`access: full`).
    pub from_alias: Alias,
    /// `OUTLOOK_SEND_FROM`, equal to that mailbox's address.
    pub(crate) from: EmailAddress,
    /// `OUTLOOK_ALLOWED_SENDERS`, deduplicated, in order; contains `from`.
    pub allowed_senders: Vec<EmailAddress>,
    /// `OUTLOOK_ALLOWED_RECIPIENT_DOMAINS`, or the sender's own domain when unset.
    pub recipient_domains: Vec<Domain>,
    /// True when `recipient_domains` is the fail-closed default, not an operator list.
    pub recipient_domains_defaulted: bool,
    /// `MAILGATE_SEND_MAX_PER_HOUR` (default [`DEFAULT_SEND_MAX_PER_HOUR`]), lowered to the
    /// sending mailbox's `smtp.rateLimit.smtpPerHour` when that is smaller.
    pub max_per_hour: u32,
    /// The credential of the sending mailbox's `smtp` block, when it names one.
    pub smtp_secret: Option<Secret>,
}

impl Gates {
    /// Resolves the gates from the environment and the config (see the module doc). The first
    /// problem aborts; the order is: gate booleans in [`Gate::ALL`] order,
    /// `OUTLOOK_HTTP_ALLOW_NO_AUTH`, the sender/recipient variables, then the send rules.
    pub fn resolve(env: &Env, config: &Config) -> Result<Gates, ConfigError> {
        let mut handoffs = false;
        let mut writes = config.allow_writes;
        let mut send_on = false;
        for gate in Gate::ALL {
            let value = parse_bool(gate.env_var(), env.raw(gate.env_var()))?;
            match gate {
                Gate::Handoffs => handoffs = value == Some(true),
                Gate::Writes => writes = value.unwrap_or(config.allow_writes),
                Gate::Send => send_on = value == Some(true),
            }
        }
        parse_bool(HTTP_ALLOW_NO_AUTH_VAR, env.raw(HTTP_ALLOW_NO_AUTH_VAR))?;

        let send_from = env
            .get(SEND_FROM_VAR)
            .map(|value| {
                EmailAddress::parse(value)
                    .map_err(|_| ConfigError::InvalidAddress { var: SEND_FROM_VAR })
            })
            .transpose()?;
        let senders = parse_list(env, ALLOWED_SENDERS_VAR, EmailAddress::parse)?;
        let domains = parse_list(env, ALLOWED_RECIPIENT_DOMAINS_VAR, Domain::parse)?;
        let max_per_hour = parse_send_cap(env.raw(SEND_MAX_PER_HOUR_VAR))?;

        let send = if send_on {
            let rules = SendRules {
                from: send_from,
                senders,
                domains,
                max_per_hour,
            };
            Some(send_settings(env, config, rules)?)
        } else {
            None
        };
        Ok(Gates {
            writes,
            handoffs,
            send,
        })
    }

    /// All gates closed: the 12-tool read catalog (also what the HTTP transport serves).
    pub fn read_only() -> Gates {
        Gates {
            writes: false,
            handoffs: false,
            send: None,
        }
    }

    pub fn is_open(&self, gate: Gate) -> bool {
        match gate {
            Gate::Handoffs => self.handoffs,
            Gate::Writes => self.writes,
            Gate::Send => self.send.is_some(),
        }
    }
}

/// A comma list from the environment. Absent or exactly empty (a shell export without a value)
/// is `None`; set but without any entry (`" "`, `","`) is an error; invalid entries are an
/// error that reports their count only. Entries are trimmed and deduplicated, order kept.
fn parse_list<T: PartialEq>(
    env: &Env,
    var: &'static str,
    parse: fn(&str) -> Result<T, AddressError>,
) -> Result<Option<Vec<T>>, ConfigError> {
    let Some(raw) = env.raw(var).filter(|raw| !raw.is_empty()) else {
        return Ok(None);
    };
    let mut items = Vec::new();
    let mut invalid = 0_usize;
    let mut seen_any = false;
    for entry in raw
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
    {
        seen_any = true;
        match parse(entry) {
            Ok(item) if !items.contains(&item) => items.push(item),
            Ok(_) => {}
            Err(_) => invalid += 1,
        }
    }
    if !seen_any {
        return Err(ConfigError::EmptyList { var });
    }
    if invalid > 0 {
        return Err(ConfigError::InvalidEntries {
            var,
            count: invalid,
        });
    }
    Ok(Some(items))
}

/// `MAILGATE_SEND_MAX_PER_HOUR`: absent or blank is the default; otherwise, trimmed, only the
/// digits of a whole number from 1 to [`MAX_SEND_MAX_PER_HOUR`] (no sign, no leading zero).
fn parse_send_cap(value: Option<&str>) -> Result<u32, ConfigError> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(DEFAULT_SEND_MAX_PER_HOUR);
    };
    let refused = ConfigError::Send(SendRefusal::BadSendCap);
    if value.len() > 4 || value.starts_with('0') || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refused);
    }
    match value.parse::<u32>() {
        Ok(cap) if (1..=MAX_SEND_MAX_PER_HOUR).contains(&cap) => Ok(cap),
        _ => Err(refused),
    }
}

/// The outbound variables as parsed, before the send rules are applied.
struct SendRules {
    from: Option<EmailAddress>,
    senders: Option<Vec<EmailAddress>>,
    domains: Option<Vec<Domain>>,
    max_per_hour: u32,
}

/// The send rules, in the reference's order, each with its own refusal; then the sending
/// mailbox's SMTP credential, when its `smtp` block names one.
fn send_settings(
    env: &Env,
    config: &Config,
    rules: SendRules,
) -> Result<SendSettings, ConfigError> {
    let SendRules {
        from,
        senders,
        domains,
        max_per_hour,
    } = rules;
    let from = from.ok_or(ConfigError::Send(SendRefusal::FromMissing))?;
    let mailbox = config
        .mailboxes
        .iter()
        .find(|entry| entry.address == from)
        .ok_or(ConfigError::Send(SendRefusal::FromNotAllowlisted))?;
    if mailbox.access != Access::Full {
        return Err(ConfigError::Send(SendRefusal::FromReadOnly));
    }
    let allowed_senders = senders.ok_or(ConfigError::Send(SendRefusal::SendersMissing))?;
    if !allowed_senders.contains(&from) {
        return Err(ConfigError::Send(SendRefusal::SendersDoNotCoverFrom));
    }
    let (recipient_domains, recipient_domains_defaulted) = match domains {
        Some(domains) => (domains, false),
        None => (vec![from.to_domain()], true),
    };
    let smtp = match &mailbox.backend {
        BackendSpec::Maildir { smtp, .. } | BackendSpec::Imap { smtp, .. } => smtp.as_ref(),
        BackendSpec::Graph { .. } => None,
    };
    let credential_var = smtp.and_then(|spec| {
        spec.password_env
            .as_deref()
            .or(spec.oauth2_token_env.as_deref())
    });
    let smtp_secret = credential_var
        .map(|var| {
            env.secret(var)
                .ok_or(ConfigError::Send(SendRefusal::SmtpSecretMissing))
        })
        .transpose()?;
    // One sending account per process, so this one cap is the per-account SMTP limit of issue 12
    // (`OutboundPolicy`'s sliding window, stricter than a token bucket: no refill before the
    // oldest send is an hour old). The smaller of the process cap and the account's limit wins;
    // the account's default (`DEFAULT_SMTP_PER_HOUR`, 100) is above the process cap's default
    // (`DEFAULT_SEND_MAX_PER_HOUR`, 20), so with neither set the effective cap stays 20. Raising
    // `MAILGATE_SEND_MAX_PER_HOUR` past 100 for an SMTP sender also needs `smtpPerHour`. A
    // sender without an `smtp` block (the outbox, Graph) has only the process cap.
    let max_per_hour = smtp.map_or(max_per_hour, |spec| spec.smtp_per_hour().min(max_per_hour));
    Ok(SendSettings {
        from_alias: mailbox.alias.clone(),
        from,
        allowed_senders,
        recipient_domains,
        recipient_domains_defaulted,
        max_per_hour,
        smtp_secret,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::Path;

    fn config(allow_writes: bool) -> Config {
        let json = format!(
            r#"{{"mailboxes": [
                {{"alias": "finance", "address": "Finance@Example.com"}},
                {{"alias": "support", "address": "support@example.org", "access": "read"}}
            ], "allowWrites": {allow_writes}}}"#
        );
        Config::from_json(json.as_bytes(), Path::new("/etc/mailgate")).expect("valid config")
    }

    fn resolve(pairs: &[(&str, &str)], allow_writes: bool) -> Result<Gates, ConfigError> {
        Gates::resolve(
            &Env::from_pairs(pairs.iter().copied()),
            &config(allow_writes),
        )
    }

    const SENDER: [(&str, &str); 2] = [
        (SEND_FROM_VAR, "finance@example.com"),
        (ALLOWED_SENDERS_VAR, "finance@example.com"),
    ];

    fn with_send(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        let mut pairs = vec![(ALLOW_SEND_VAR, "true")];
        pairs.extend_from_slice(&SENDER);
        for (key, value) in extra {
            pairs.retain(|(k, _)| k != key);
            pairs.push((key, value));
        }
        pairs
    }

    fn send_error(pairs: &[(&str, &str)]) -> ConfigError {
        resolve(pairs, false).expect_err("send gate must refuse")
    }

    #[test]
    fn every_documented_spelling_is_accepted() {
        for spelling in [
            "true", "TRUE", " True ", "1", "yes", "YES", "on", "ON", "\tOn\n",
        ] {
            assert_eq!(
                parse_bool(ALLOW_WRITES_VAR, Some(spelling)).expect(spelling),
                Some(true)
            );
        }
        for spelling in [
            "false", "FALSE", " False ", "0", "no", "NO", "off", "OFF", "\toFF\n",
        ] {
            assert_eq!(
                parse_bool(ALLOW_WRITES_VAR, Some(spelling)).expect(spelling),
                Some(false)
            );
        }
        for blank in [None, Some(""), Some("   "), Some("\t\n")] {
            assert_eq!(parse_bool(ALLOW_WRITES_VAR, blank).expect("blank"), None);
        }
    }

    #[test]
    fn other_spellings_are_rejected_naming_the_variable() {
        for gate in Gate::ALL {
            for bad in [
                "yesplease",
                "2",
                "truthy",
                "enabled",
                "y",
                "t",
                "-1",
                "true false",
            ] {
                let error = resolve(&[(gate.env_var(), bad)], false).expect_err(bad);
                assert!(
                    matches!(error, ConfigError::NotBoolean { var } if var == gate.env_var()),
                    "{error:?}"
                );
                let message = error.to_string();
                assert!(message.contains(gate.env_var()), "{message}");
                if bad.len() > 3 {
                    // Short values ("2", "y") occur in any sentence; check the distinctive ones.
                    assert!(!message.contains(bad), "value echoed: {message}");
                }
            }
        }
        let error = resolve(&[(HTTP_ALLOW_NO_AUTH_VAR, "enabled")], false).expect_err("bad");
        assert!(matches!(
            error,
            ConfigError::NotBoolean {
                var: HTTP_ALLOW_NO_AUTH_VAR
            }
        ));
        assert!(resolve(&[(HTTP_ALLOW_NO_AUTH_VAR, "on")], false).is_ok());
    }

    #[test]
    fn writes_env_overrides_the_file_both_ways_and_blank_falls_back() {
        assert!(
            !resolve(&[(ALLOW_WRITES_VAR, "false")], true)
                .expect("ok")
                .writes
        );
        assert!(
            !resolve(&[(ALLOW_WRITES_VAR, "off")], true)
                .expect("ok")
                .writes
        );
        assert!(
            resolve(&[(ALLOW_WRITES_VAR, "true")], false)
                .expect("ok")
                .writes
        );
        assert!(
            resolve(&[(ALLOW_WRITES_VAR, "  ")], true)
                .expect("ok")
                .writes
        );
        assert!(
            !resolve(&[(ALLOW_WRITES_VAR, "")], false)
                .expect("ok")
                .writes
        );
        assert!(resolve(&[], true).expect("ok").writes);
        assert!(!resolve(&[], false).expect("ok").writes);
    }

    #[test]
    fn handoffs_and_send_have_no_file_fallback() {
        let gates = resolve(&[], true).expect("ok");
        assert!(!gates.handoffs);
        assert!(gates.send.is_none());
        assert!(
            resolve(&[(ALLOW_HANDOFFS_VAR, "yes")], false)
                .expect("ok")
                .handoffs
        );
        assert!(
            !resolve(&[(ALLOW_HANDOFFS_VAR, "no")], false)
                .expect("ok")
                .handoffs
        );
        // A fully configured sender does not open the gate by itself.
        assert!(resolve(&SENDER, false).expect("ok").send.is_none());
        assert!(
            resolve(&with_send(&[(ALLOW_SEND_VAR, "off")]), false)
                .expect("ok")
                .send
                .is_none()
        );
    }

    #[test]
    fn read_only_and_is_open() {
        let gates = Gates::read_only();
        assert!(Gate::ALL.iter().all(|gate| !gates.is_open(*gate)));
        let gates = resolve(
            &with_send(&[(ALLOW_HANDOFFS_VAR, "1"), (ALLOW_WRITES_VAR, "1")]),
            false,
        )
        .expect("all open");
        assert!(Gate::ALL.iter().all(|gate| gates.is_open(*gate)));
        let vars = Gate::ALL.map(Gate::env_var);
        assert_eq!(vars, [ALLOW_HANDOFFS_VAR, ALLOW_WRITES_VAR, ALLOW_SEND_VAR]);
    }

    #[test]
    fn send_opens_with_a_full_configuration_and_defaults_recipients() {
        let gates =
            resolve(&with_send(&[(SEND_FROM_VAR, "FINANCE@example.com")]), false).expect("open");
        let send = gates.send.expect("send settings");
        assert_eq!(send.from_alias.as_str(), "finance");
        assert_eq!(send.from.as_str(), "finance@example.com");
        assert_eq!(send.allowed_senders, vec![send.from.clone()]);
        assert_eq!(
            send.recipient_domains,
            vec![Domain::parse("example.com").expect("domain")]
        );
        assert!(send.recipient_domains_defaulted);

        // An exported-but-empty domain list counts as unset: still the fail-closed default.
        let send = resolve(&with_send(&[(ALLOWED_RECIPIENT_DOMAINS_VAR, "")]), false)
            .expect("open")
            .send
            .expect("send");
        assert!(send.recipient_domains_defaulted);

        let send = resolve(
            &with_send(&[
                (
                    ALLOWED_SENDERS_VAR,
                    " finance@example.com , other@example.net,FINANCE@example.com",
                ),
                (
                    ALLOWED_RECIPIENT_DOMAINS_VAR,
                    "@Example.org, example.net,example.org",
                ),
            ]),
            false,
        )
        .expect("open")
        .send
        .expect("send");
        assert_eq!(
            send.allowed_senders.len(),
            2,
            "deduplicated case-insensitively"
        );
        let domains: Vec<&str> = send.recipient_domains.iter().map(Domain::as_str).collect();
        assert_eq!(domains, ["example.org", "example.net"]);
        assert!(!send.recipient_domains_defaulted);
    }

    #[test]
    fn send_refusals() {
        let refusal = |pairs: &[(&str, &str)]| match send_error(pairs) {
            ConfigError::Send(refusal) => refusal,
            other => panic!("expected a send refusal, got {other:?}"),
        };
        assert_eq!(
            refusal(&[(ALLOW_SEND_VAR, "true")]),
            SendRefusal::FromMissing
        );
        assert_eq!(
            refusal(&with_send(&[(SEND_FROM_VAR, "  ")])),
            SendRefusal::FromMissing
        );
        assert_eq!(
            refusal(&with_send(&[(SEND_FROM_VAR, "ceo@example.com")])),
            SendRefusal::FromNotAllowlisted
        );
        assert_eq!(
            refusal(&with_send(&[
                (SEND_FROM_VAR, "support@example.org"),
                (ALLOWED_SENDERS_VAR, "support@example.org"),
            ])),
            SendRefusal::FromReadOnly
        );
        let without_senders: Vec<_> = with_send(&[])
            .into_iter()
            .filter(|(k, _)| *k != ALLOWED_SENDERS_VAR)
            .collect();
        assert_eq!(refusal(&without_senders), SendRefusal::SendersMissing);
        assert_eq!(
            refusal(&with_send(&[(ALLOWED_SENDERS_VAR, "")])),
            SendRefusal::SendersMissing
        );
        assert_eq!(
            refusal(&with_send(&[(ALLOWED_SENDERS_VAR, "other@example.com")])),
            SendRefusal::SendersDoNotCoverFrom
        );
        let message = send_error(&with_send(&[(SEND_FROM_VAR, "ceo@example.com")])).to_string();
        assert!(
            message.contains(SEND_FROM_VAR) && !message.contains("ceo@"),
            "{message}"
        );
    }

    #[test]
    fn malformed_lists_abort_with_a_count() {
        for empty in [" ", ",", ",,,", "\t", "\n", " , "] {
            for var in [ALLOWED_SENDERS_VAR, ALLOWED_RECIPIENT_DOMAINS_VAR] {
                let error = send_error(&with_send(&[(var, empty)]));
                assert!(
                    matches!(error, ConfigError::EmptyList { var: v } if v == var),
                    "{error:?}"
                );
            }
        }
        let error = send_error(&with_send(&[(
            ALLOWED_RECIPIENT_DOMAINS_VAR,
            "example.com, not a domain,http://evil.example.net,example.org",
        )]));
        assert!(
            matches!(
                error,
                ConfigError::InvalidEntries {
                    var: ALLOWED_RECIPIENT_DOMAINS_VAR,
                    count: 2
                }
            ),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(message.contains("count: 2"), "{message}");
        assert!(
            !message.contains("evil") && !message.contains("not a domain"),
            "{message}"
        );

        let error = send_error(&with_send(&[(
            ALLOWED_SENDERS_VAR,
            "finance@example.com,a@b.c/../../users/victim,<x@example.com>,y@example.com#f",
        )]));
        assert!(
            matches!(
                error,
                ConfigError::InvalidEntries {
                    var: ALLOWED_SENDERS_VAR,
                    count: 3
                }
            ),
            "{error:?}"
        );
        assert!(!error.to_string().contains("victim"));

        let error = send_error(&with_send(&[(SEND_FROM_VAR, "finance@example.com/x")]));
        assert!(
            matches!(error, ConfigError::InvalidAddress { var: SEND_FROM_VAR }),
            "{error:?}"
        );
    }

    #[test]
    fn the_send_cap_defaults_and_is_strict() {
        let cap = |value: &'static str| {
            resolve(&with_send(&[(SEND_MAX_PER_HOUR_VAR, value)]), false)
                .map(|gates| gates.send.expect("open").max_per_hour)
        };
        assert_eq!(
            resolve(&with_send(&[]), false)
                .expect("open")
                .send
                .expect("send")
                .max_per_hour,
            DEFAULT_SEND_MAX_PER_HOUR
        );
        assert_eq!(cap("").expect("blank is unset"), DEFAULT_SEND_MAX_PER_HOUR);
        assert_eq!(cap(" 7 ").expect("trimmed"), 7);
        assert_eq!(cap("1").expect("min"), 1);
        assert_eq!(cap("1000").expect("max"), 1000);
        for bad in [
            "0",
            "-1",
            "+5",
            "1001",
            "99999",
            "007",
            "1e3",
            "ten",
            "5 5",
            "4294967297",
            "2.5",
        ] {
            let error = cap(bad).expect_err(bad);
            assert!(
                matches!(error, ConfigError::Send(SendRefusal::BadSendCap)),
                "{bad}: {error:?}"
            );
            assert!(error.to_string().contains(SEND_MAX_PER_HOUR_VAR));
        }
        // Validated with the gate closed too.
        assert!(resolve(&[(SEND_MAX_PER_HOUR_VAR, "lots")], false).is_err());
        assert!(resolve(&[(SEND_MAX_PER_HOUR_VAR, "5")], false).is_ok());
    }

    #[test]
    fn the_senders_smtp_credential_is_resolved_and_required() {
        let config = |credential: &str| {
            let json = format!(
                r#"{{"mailboxes": [{{"alias": "finance", "address": "finance@example.com",
                    "backend": {{"kind": "maildir", "path": "/m", "smtp": {{"host": "127.0.0.1",
                    "port": 2525, "security": "plain"{credential}}}}}}}]}}"#
            );
            Config::from_json(json.as_bytes(), Path::new("/etc/mailgate")).expect("valid config")
        };
        let env = |extra: &[(&'static str, &'static str)]| {
            let mut pairs = with_send(&[]);
            pairs.extend_from_slice(extra);
            Env::from_pairs(pairs)
        };
        let limited = config(r#", "rateLimit": {"smtpPerHour": 5}"#);
        let cap = |pairs: &[(&'static str, &'static str)]| {
            Gates::resolve(&env(pairs), &limited)
                .expect("open")
                .send
                .expect("send")
                .max_per_hour
        };
        assert_eq!(cap(&[]), 5, "the smtp block's smaller limit wins");
        assert_eq!(cap(&[(SEND_MAX_PER_HOUR_VAR, "3")]), 3);
        assert_eq!(cap(&[(SEND_MAX_PER_HOUR_VAR, "50")]), 5);
        // Issue 12's per-account default (100 an hour) bounds an SMTP sender without its own
        // limit; the process cap's default (20) is the smaller one when neither is set.
        let unlimited = config("");
        let cap_of = |config: &Config, pairs: &[(&'static str, &'static str)]| {
            Gates::resolve(&env(pairs), config)
                .expect("open")
                .send
                .expect("send")
                .max_per_hour
        };
        assert_eq!(cap_of(&unlimited, &[]), DEFAULT_SEND_MAX_PER_HOUR);
        assert_eq!(cap_of(&unlimited, &[(SEND_MAX_PER_HOUR_VAR, "50")]), 50);
        assert_eq!(
            cap_of(&unlimited, &[(SEND_MAX_PER_HOUR_VAR, "500")]),
            crate::config::DEFAULT_SMTP_PER_HOUR
        );
        let with_password = config(r#", "passwordEnv": "FINANCE_SMTP_PW""#);
        let send = Gates::resolve(&env(&[("FINANCE_SMTP_PW", "s3cret pass")]), &with_password)
            .expect("open")
            .send
            .expect("send");
        assert_eq!(
            send.smtp_secret.as_ref().map(Secret::expose),
            Some("s3cret pass")
        );
        assert!(!format!("{send:?}").contains("s3cret"), "Debug redacts");
        for missing in [env(&[]), env(&[("FINANCE_SMTP_PW", "")])] {
            let error = Gates::resolve(&missing, &with_password).expect_err("missing secret");
            assert!(
                matches!(error, ConfigError::Send(SendRefusal::SmtpSecretMissing)),
                "{error:?}"
            );
            assert!(!error.to_string().contains("FINANCE_SMTP_PW"));
        }
        // Closed gate: the credential is not needed.
        assert!(Gates::resolve(&Env::from_pairs(SENDER), &with_password).is_ok());
        let with_token = config(r#", "oauth2TokenEnv": "FINANCE_TOKEN""#);
        let send = Gates::resolve(&env(&[("FINANCE_TOKEN", "tok")]), &with_token)
            .expect("open")
            .send
            .expect("send");
        assert_eq!(send.smtp_secret.as_ref().map(Secret::expose), Some("tok"));
        let send = Gates::resolve(&env(&[]), &config(""))
            .expect("no credential named")
            .send
            .expect("send");
        assert!(send.smtp_secret.is_none());
    }

    #[test]
    fn lists_are_validated_even_with_the_gate_closed() {
        for (var, value) in [
            (ALLOWED_SENDERS_VAR, ","),
            (ALLOWED_SENDERS_VAR, "nope"),
            (ALLOWED_RECIPIENT_DOMAINS_VAR, " "),
            (ALLOWED_RECIPIENT_DOMAINS_VAR, "-bad.com"),
            (SEND_FROM_VAR, "Name <finance@example.com>"),
        ] {
            assert!(resolve(&[(var, value)], false).is_err(), "{var}={value:?}");
            assert!(resolve(&[(ALLOW_SEND_VAR, "false"), (var, value)], false).is_err());
        }
    }

    // --- property tests over the whole gate matrix ------------------------------------------

    /// How one gate variable is spelled in a generated environment.
    #[derive(Clone, Debug)]
    enum Spelling {
        Absent,
        Blank(String),
        On(String),
        Off(String),
        Invalid(String),
    }

    impl Spelling {
        fn value(&self) -> Option<&str> {
            match self {
                Spelling::Absent => None,
                Spelling::Blank(s) | Spelling::On(s) | Spelling::Off(s) | Spelling::Invalid(s) => {
                    Some(s)
                }
            }
        }
    }

    fn whitespace() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["", "", " ", "  ", "\t", "\n", " \t "]).prop_map(str::to_owned)
    }

    fn decorated(words: &'static [&'static str]) -> impl Strategy<Value = String> {
        (
            prop::sample::select(words),
            prop::collection::vec(any::<bool>(), 8),
            whitespace(),
            whitespace(),
        )
            .prop_map(|(word, upper, before, after)| {
                let cased: String = word
                    .chars()
                    .zip(upper.iter().cycle())
                    .map(|(c, up)| if *up { c.to_ascii_uppercase() } else { c })
                    .collect();
                format!("{before}{cased}{after}")
            })
    }

    const INVALID: &[&str] = &[
        "yesplease",
        "2",
        "truthy",
        "enabled",
        "disabled",
        "y",
        "n",
        "t",
        "f",
        "-1",
        "01",
        "true false",
        "on!",
        "nope",
        "ja",
    ];

    fn spelling() -> impl Strategy<Value = Spelling> {
        prop_oneof![
            Just(Spelling::Absent),
            whitespace().prop_map(Spelling::Blank),
            decorated(&["true", "1", "yes", "on"]).prop_map(Spelling::On),
            decorated(&["false", "0", "no", "off"]).prop_map(Spelling::Off),
            decorated(INVALID).prop_map(Spelling::Invalid),
        ]
    }

    fn valid_spelling() -> impl Strategy<Value = Spelling> {
        spelling().prop_filter("no invalid spelling", |s| {
            !matches!(s, Spelling::Invalid(_))
        })
    }

    /// `[handoffs, writes, send]`, indexed like `Gate::ALL`.
    fn env_for(spellings: &[Spelling; 3]) -> Env {
        let mut pairs: Vec<(String, String)> = SENDER
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        for (gate, spelling) in Gate::ALL.iter().zip(spellings) {
            if let Some(value) = spelling.value() {
                pairs.push((gate.env_var().to_owned(), value.to_owned()));
            }
        }
        Env::from_pairs(pairs)
    }

    /// The specification, written independently of `resolve`.
    fn expected(spellings: &[Spelling; 3], file_writes: bool) -> Result<[bool; 3], &'static str> {
        for (gate, spelling) in Gate::ALL.iter().zip(spellings) {
            if matches!(spelling, Spelling::Invalid(_)) {
                return Err(gate.env_var());
            }
        }
        let on = |s: &Spelling| matches!(s, Spelling::On(_));
        let writes = match &spellings[1] {
            Spelling::On(_) => true,
            Spelling::Off(_) => false,
            _ => file_writes,
        };
        Ok([on(&spellings[0]), writes, on(&spellings[2])])
    }

    fn open_flags(gates: &Gates) -> [bool; 3] {
        Gate::ALL.map(|gate| gates.is_open(gate))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn resolve_matches_the_specification(
            spellings in [spelling(), spelling(), spelling()],
            file_writes in any::<bool>(),
        ) {
            let result = Gates::resolve(&env_for(&spellings), &config(file_writes));
            match (expected(&spellings, file_writes), result) {
                (Ok(flags), Ok(gates)) => {
                    prop_assert_eq!(open_flags(&gates), flags);
                    prop_assert_eq!((gates.handoffs, gates.writes), (flags[0], flags[1]));
                }
                (Err(var), Err(ConfigError::NotBoolean { var: got })) => {
                    prop_assert_eq!(got, var);
                }
                (want, got) => {
                    prop_assert!(false, "expected {:?}, got {:?}", want, got);
                }
            }
        }

        #[test]
        fn opening_one_more_gate_never_closes_another(
            spellings in [valid_spelling(), valid_spelling(), valid_spelling()],
            file_writes in any::<bool>(),
            which in 0_usize..3,
            on in decorated(&["true", "1", "yes", "on"]),
        ) {
            let before = Gates::resolve(&env_for(&spellings), &config(file_writes))
                .expect("valid spellings resolve");
            let mut opened = spellings.clone();
            opened[which] = Spelling::On(on);
            let after = Gates::resolve(&env_for(&opened), &config(file_writes))
                .expect("valid spellings resolve");
            let (before, after) = (open_flags(&before), open_flags(&after));
            prop_assert!(after[which]);
            for gate in 0..3 {
                prop_assert!(!before[gate] || after[gate], "{:?} closed", Gate::ALL[gate]);
            }
        }
    }
}
