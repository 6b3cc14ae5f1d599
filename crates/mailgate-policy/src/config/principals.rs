//! The per-person policy (issue 29): `principals` in `plugin.json` maps an identity the OAuth
//! resource server has verified to the aliases that person may reach over remote HTTP, and to an
//! access level no wider than each alias's own.
//!
//! Invariants: a [`Principal`] has a label with the alias syntax (it is what logs, the journal
//! and `policy explain` show, so it is never a claim value), exactly one identity ([`Identity`]:
//! a `sub`, a verified `email`, or a `group` membership, each an exact match), and at least one
//! grant, every grant naming an allowlisted alias once. Labels and identities are unique. A
//! grant's access is the principal's (`read` unless the file says `full`) and is refused when it
//! is wider than the alias's own, so no principal can undo a per-alias narrowing.
//!
//! Matching order is the file's: the first principal whose identity the token carries is the
//! person's (an operator lists a person's own entry before a group's). Who may call it:
//! `Config::from_raw` builds the list; the HTTP transport matches verified claims against it.

use std::collections::HashMap;

use super::error::ConfigError;
use super::raw::{RawAccess, RawPrincipal};
use super::{Access, MailboxEntry};
use crate::address::EmailAddress;
use crate::alias::Alias;

/// The longest `sub` or group name a principal may match (characters). Real ones are short
/// (Entra object ids are 36, Auth0 subjects under 64); a cap keeps a mistake from being a novel.
pub const MAX_CLAIM_CHARS: usize = 256;

/// A principal's label: the alias syntax, so it can be logged and echoed like an alias.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct PrincipalLabel(Alias);

impl PrincipalLabel {
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl std::fmt::Display for PrincipalLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a verified token must carry for the principal to be the caller.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Identity {
    /// The `sub` claim, exactly.
    Subject(String),
    /// The `email` claim (lower-cased on both sides), only when the token says it is verified.
    Email(EmailAddress),
    /// One of the values of the `groups` (or `roles`) claim, exactly.
    Group(String),
}

impl Identity {
    /// The claim kind, for `policy explain` (the value itself is shown only to the operator).
    pub fn kind(&self) -> &'static str {
        match self {
            Identity::Subject(_) => "sub",
            Identity::Email(_) => "email",
            Identity::Group(_) => "group",
        }
    }
}

/// One alias a principal may reach, at an access no wider than the alias's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub alias: Alias,
    pub access: Access,
}

/// One person (or group of people) of the remote policy.
#[derive(Clone, Debug)]
pub struct Principal {
    pub label: PrincipalLabel,
    pub identity: Identity,
    /// In the file's order, each alias once.
    pub grants: Vec<Grant>,
}

impl Principal {
    /// The grant for `alias`, if this principal has one.
    pub fn grant(&self, alias: &Alias) -> Option<&Grant> {
        self.grants.iter().find(|g| &g.alias == alias)
    }
}

/// Checks every `principals[]` entry against the allowlist (`mailboxes`, already validated).
pub(super) fn principals_from_raw(
    raw: Vec<RawPrincipal>,
    mailboxes: &[MailboxEntry],
) -> Result<Vec<Principal>, ConfigError> {
    let mut out = Vec::with_capacity(raw.len());
    let mut labels: HashMap<PrincipalLabel, usize> = HashMap::new();
    let mut identities: HashMap<Identity, usize> = HashMap::new();
    for (index, entry) in raw.into_iter().enumerate() {
        let at = format!("principals[{index}]");
        let label = Alias::parse(&entry.label)
            .ok()
            .filter(|a| a.as_str() == entry.label)
            .map(PrincipalLabel)
            .ok_or_else(|| {
                ConfigError::schema(
                    format!("{at}.label"),
                    "must match ^[a-z0-9][a-z0-9_-]*$ and be at most 64 characters",
                )
            })?;
        if let Some(first) = labels.insert(label.clone(), index) {
            return Err(ConfigError::schema(
                format!("{at}.label"),
                format!("duplicates principals[{first}].label"),
            ));
        }
        let identity = identity(&entry, &at)?;
        if let Some(first) = identities.insert(identity.clone(), index) {
            return Err(ConfigError::schema(
                format!("{at}.match"),
                format!("duplicates principals[{first}].match"),
            ));
        }
        let access = match entry.access {
            None | Some(RawAccess::Read) => Access::Read,
            Some(RawAccess::Full) => Access::Full,
        };
        if entry.aliases.is_empty() {
            return Err(ConfigError::schema(
                format!("{at}.aliases"),
                "must list at least one alias",
            ));
        }
        let mut grants: Vec<Grant> = Vec::with_capacity(entry.aliases.len());
        for (i, name) in entry.aliases.iter().enumerate() {
            let path = format!("{at}.aliases[{i}]");
            let mailbox = Alias::parse(name)
                .ok()
                .filter(|a| a.as_str() == name)
                .and_then(|a| mailboxes.iter().find(|m| m.alias == a))
                .ok_or_else(|| ConfigError::schema(&path, "is not an alias of mailboxes"))?;
            if grants.iter().any(|g| g.alias == mailbox.alias) {
                return Err(ConfigError::schema(&path, "lists the same alias twice"));
            }
            if access == Access::Full && mailbox.access == Access::Read {
                return Err(ConfigError::schema(
                    format!("{at}.access"),
                    "is wider than the access of an alias it lists (narrowed to read)",
                ));
            }
            grants.push(Grant {
                alias: mailbox.alias.clone(),
                access,
            });
        }
        out.push(Principal {
            label,
            identity,
            grants,
        });
    }
    Ok(out)
}

/// `match`: exactly one of `sub`, `email`, `group`, non-empty, without control characters.
fn identity(entry: &RawPrincipal, at: &str) -> Result<Identity, ConfigError> {
    let m = &entry.matcher;
    let path = format!("{at}.match");
    let given = [m.sub.is_some(), m.email.is_some(), m.group.is_some()]
        .iter()
        .filter(|set| **set)
        .count();
    if given != 1 {
        return Err(ConfigError::schema(
            path,
            "must hold exactly one of sub, email, group",
        ));
    }
    let claim = |value: &str, key: &str| -> Result<String, ConfigError> {
        if value.is_empty()
            || value.trim() != value
            || value.chars().any(char::is_control)
            || value.chars().count() > MAX_CLAIM_CHARS
        {
            return Err(ConfigError::schema(
                format!("{path}.{key}"),
                format!(
                    "must be 1-{MAX_CLAIM_CHARS} characters, no surrounding space or control \
                     character"
                ),
            ));
        }
        Ok(value.to_owned())
    };
    if let Some(sub) = &m.sub {
        return Ok(Identity::Subject(claim(sub, "sub")?));
    }
    if let Some(group) = &m.group {
        return Ok(Identity::Group(claim(group, "group")?));
    }
    let email = m.email.as_deref().unwrap_or_default();
    EmailAddress::parse(email)
        .map(Identity::Email)
        .map_err(|e| ConfigError::schema(format!("{path}.email"), e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{parse, refusal};

    const BOXES: &str = r#""mailboxes": [
        {"alias": "finance", "address": "finance@example.com"},
        {"alias": "support", "address": "support@example.com", "access": "read"}
    ]"#;

    fn with(principals: &str) -> String {
        format!("{{{BOXES}, \"principals\": {principals}}}")
    }

    #[test]
    fn a_principal_maps_one_identity_to_allowlisted_aliases() {
        let config = parse(&with(
            r#"[{"label": "ana", "match": {"sub": "00000000-aaaa"}, "aliases": ["finance", "support"]},
                {"label": "team", "match": {"group": "finance-team"}, "aliases": ["finance"]},
                {"label": "bo", "match": {"email": "Bo@Example.com"}, "aliases": ["support"]}]"#,
        ))
        .expect("valid");
        let p = &config.principals;
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].label.as_str(), "ana");
        assert_eq!(
            p[0].identity,
            super::Identity::Subject("00000000-aaaa".into())
        );
        assert_eq!(p[0].grants.len(), 2);
        assert!(
            p[0].grants.iter().all(|g| g.access == super::Access::Read),
            "read unless the file says full"
        );
        assert_eq!(p[1].identity.kind(), "group");
        match &p[2].identity {
            super::Identity::Email(e) => assert_eq!(e.as_str(), "bo@example.com"),
            other => panic!("{other:?}"),
        }
        let none = parse(&format!("{{{BOXES}}}")).expect("valid");
        assert!(none.principals.is_empty());
    }

    /// Every rule of the module doc, as the operator sees its refusal: the JSON path and the
    /// rule, never the value.
    #[test]
    fn every_rule_refuses_with_its_path() {
        let cases: &[(&str, &str)] = &[
            (
                r#"[{"label": "Ana", "match": {"sub": "x"}, "aliases": ["finance"]}]"#,
                "principals[0].label",
            ),
            (
                r#"[{"label": "ana", "match": {"sub": "x"}, "aliases": ["finance"]},
                    {"label": "ana", "match": {"sub": "y"}, "aliases": ["finance"]}]"#,
                "principals[1].label",
            ),
            (
                r#"[{"label": "ana", "match": {}, "aliases": ["finance"]}]"#,
                "principals[0].match",
            ),
            (
                r#"[{"label": "ana", "match": {"sub": "x", "group": "g"}, "aliases": ["finance"]}]"#,
                "principals[0].match",
            ),
            (
                r#"[{"label": "ana", "match": {"sub": ""}, "aliases": ["finance"]}]"#,
                "principals[0].match.sub",
            ),
            (
                r#"[{"label": "ana", "match": {"group": "a\u0007b"}, "aliases": ["finance"]}]"#,
                "principals[0].match.group",
            ),
            (
                r#"[{"label": "ana", "match": {"email": "not an address"}, "aliases": ["finance"]}]"#,
                "principals[0].match.email",
            ),
            (
                r#"[{"label": "ana", "match": {"sub": "x"}, "aliases": ["finance"]},
                    {"label": "bo", "match": {"sub": "x"}, "aliases": ["support"]}]"#,
                "principals[1].match",
            ),
            (
                r#"[{"label": "ana", "match": {"sub": "x"}, "aliases": []}]"#,
                "principals[0].aliases",
            ),
            (
                r#"[{"label": "ana", "match": {"sub": "x"}, "aliases": ["payroll"]}]"#,
                "principals[0].aliases[0]",
            ),
            (
                r#"[{"label": "ana", "match": {"sub": "x"}, "aliases": ["finance", "finance"]}]"#,
                "principals[0].aliases[1]",
            ),
            (
                r#"[{"label": "ana", "match": {"sub": "x"}, "aliases": ["support"], "access": "full"}]"#,
                "principals[0].access",
            ),
            (
                r#"[{"label": "ana", "match": {"sub": "x"}, "aliases": ["finance"], "role": "admin"}]"#,
                "principals[0]",
            ),
        ];
        for (principals, path) in cases {
            let (at, rule) = refusal(&with(principals));
            assert!(
                at.starts_with(path),
                "{principals}: expected {path}, got {at}: {rule}"
            );
            assert!(
                !rule.contains("payroll") && !rule.contains('\u{7}') && !rule.contains("admin"),
                "{rule}"
            );
        }
    }
}
