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
//!   recipients are confined to the sender's own domain. The sender and recipient lists are
//!   validated whenever they are set, even with the gate closed, so a typo surfaces at once.
//! - A [`Gates`] value is never mutated after startup (it is built here and read elsewhere).
//!
//! Who may call it: startup (`config::load_settings`) resolves; the catalog and the tools read.

pub(crate) mod catalog;

use crate::alias::Alias;
use crate::config::env::Env;
use crate::config::{Access, Config, ConfigError};
use crate::policy::address::{AddressError, Domain, EmailAddress};

/// `PLUGIN_ALLOW_WRITES`: tri-state, overrides the file's `allowWrites` when set.
pub(crate) const ALLOW_WRITES_VAR: &str = "PLUGIN_ALLOW_WRITES";
/// `PLUGIN_ALLOW_LOCAL_HANDOFFS`: environment only.
pub(crate) const ALLOW_HANDOFFS_VAR: &str = "PLUGIN_ALLOW_LOCAL_HANDOFFS";
/// `PLUGIN_ALLOW_SEND`: environment only, plus a fully configured sender.
pub(crate) const ALLOW_SEND_VAR: &str = "PLUGIN_ALLOW_SEND";
/// `OUTLOOK_HTTP_ALLOW_NO_AUTH`: validated here as a strict boolean; the HTTP transport reads it.
pub(crate) const HTTP_ALLOW_NO_AUTH_VAR: &str = "OUTLOOK_HTTP_ALLOW_NO_AUTH";
/// The mailbox address new messages are sent from.
pub(crate) const SEND_FROM_VAR: &str = "OUTLOOK_SEND_FROM";
/// Comma list of addresses allowed to send.
pub(crate) const ALLOWED_SENDERS_VAR: &str = "OUTLOOK_ALLOWED_SENDERS";
/// Comma list of recipient domains (leading `@` optional).
pub(crate) const ALLOWED_RECIPIENT_DOMAINS_VAR: &str = "OUTLOOK_ALLOWED_RECIPIENT_DOMAINS";

/// A gate. Matched exhaustively elsewhere, so adding one breaks the catalog build until wired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Gate {
    Handoffs,
    Writes,
    Send,
}

impl Gate {
    /// Every gate, in the order their variables are validated.
    pub(crate) const ALL: [Gate; 3] = [Gate::Handoffs, Gate::Writes, Gate::Send];

    /// The environment variable that opens this gate.
    pub(crate) fn env_var(self) -> &'static str {
        match self {
            Gate::Handoffs => ALLOW_HANDOFFS_VAR,
            Gate::Writes => ALLOW_WRITES_VAR,
            Gate::Send => ALLOW_SEND_VAR,
        }
    }
}

/// Why the send gate could not open although `PLUGIN_ALLOW_SEND` is on. Messages name the
/// variables and the rule, never an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SendRefusal {
    #[error("PLUGIN_ALLOW_SEND is on but OUTLOOK_SEND_FROM is not set")]
    FromMissing,
    #[error("OUTLOOK_SEND_FROM does not match any mailbox address in the config")]
    FromNotAllowlisted,
    #[error("the mailbox named by OUTLOOK_SEND_FROM has access \"read\" and cannot send")]
    FromReadOnly,
    #[error("PLUGIN_ALLOW_SEND is on but OUTLOOK_ALLOWED_SENDERS is not set")]
    SendersMissing,
    #[error("OUTLOOK_ALLOWED_SENDERS does not contain the OUTLOOK_SEND_FROM address")]
    SendersDoNotCoverFrom,
}

/// The resolved gates.
#[derive(Clone, Debug)]
pub(crate) struct Gates {
    pub(crate) writes: bool,
    pub(crate) handoffs: bool,
    /// `Some` exactly when the send gate is open.
    pub(crate) send: Option<SendSettings>,
}

/// The outbound configuration in force when the send gate is open.
#[derive(Clone, Debug)]
pub(crate) struct SendSettings {
    /// The alias of the sending mailbox (`access: full`).
    pub(crate) from_alias: Alias,
    /// `OUTLOOK_SEND_FROM`, equal to that mailbox's address.
    #[allow(
        dead_code,
        reason = "read by policy::outbound, which arrives with the send issue"
    )]
    pub(crate) from: EmailAddress,
    /// `OUTLOOK_ALLOWED_SENDERS`, deduplicated, in order; contains `from`.
    pub(crate) allowed_senders: Vec<EmailAddress>,
    /// `OUTLOOK_ALLOWED_RECIPIENT_DOMAINS`, or the sender's own domain when unset.
    pub(crate) recipient_domains: Vec<Domain>,
    /// True when `recipient_domains` is the fail-closed default, not an operator list.
    pub(crate) recipient_domains_defaulted: bool,
}

impl Gates {
    /// Resolves the gates from the environment and the config (see the module doc). The first
    /// problem aborts; the order is: gate booleans in [`Gate::ALL`] order,
    /// `OUTLOOK_HTTP_ALLOW_NO_AUTH`, the sender/recipient variables, then the send rules.
    pub(crate) fn resolve(env: &Env, config: &Config) -> Result<Gates, ConfigError> {
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

        let send = if send_on {
            Some(send_settings(config, send_from, senders, domains)?)
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
    pub(crate) fn read_only() -> Gates {
        Gates {
            writes: false,
            handoffs: false,
            send: None,
        }
    }

    pub(crate) fn is_open(&self, gate: Gate) -> bool {
        match gate {
            Gate::Handoffs => self.handoffs,
            Gate::Writes => self.writes,
            Gate::Send => self.send.is_some(),
        }
    }
}

/// Strict boolean: trimmed and lower-cased, `true/1/yes/on` or `false/0/no/off`; absent or blank
/// is `Ok(None)` ("not set"); anything else is an error naming `var` (never the value).
pub(crate) fn parse_bool(
    var: &'static str,
    value: Option<&str>,
) -> Result<Option<bool>, ConfigError> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(Some(true)),
        "false" | "0" | "no" | "off" => Ok(Some(false)),
        _ => Err(ConfigError::NotBoolean { var }),
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

/// The send rules, in the reference's order, each with its own refusal.
fn send_settings(
    config: &Config,
    from: Option<EmailAddress>,
    senders: Option<Vec<EmailAddress>>,
    domains: Option<Vec<Domain>>,
) -> Result<SendSettings, ConfigError> {
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
    Ok(SendSettings {
        from_alias: mailbox.alias.clone(),
        from,
        allowed_senders,
        recipient_domains,
        recipient_domains_defaulted,
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
