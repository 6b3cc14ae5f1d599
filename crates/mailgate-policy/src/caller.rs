//! Who is calling, and what they may reach (issue 29, item 1). Every tool call runs for one
//! [`Caller`]: the [`Caller::Operator`] of stdio and the CLI (today's behaviour: every
//! allowlisted mailbox at its own access), or a [`Caller::Person`] that the HTTP resource server
//! verified and matched to a principal of `plugin.json` (only the aliases that principal lists).
//!
//! Invariant: a [`GrantedAlias`] is the only key that opens a mailbox (the backend registry and
//! the index readers take nothing else), and the only constructors are [`Caller::grant`] and
//! [`Caller::granted`], which consult the caller's grants. So code holding a caller and an alias
//! string reaches a mailbox only through this module's decision; what a person may reach is
//! decided here, in one place, by the compiler's rules rather than a reviewer's reading of every
//! handler. A grant's access is the narrower of the alias's own and the principal's.
//!
//! Who may call it: the transports build callers (stdio and the CLI: [`Caller::Operator`]; HTTP:
//! [`Caller::person`] after verifying a token, or the operator in the loopback bearer mode); the
//! tool core resolves aliases through [`Caller::grant`]; startup and operator commands, which act
//! for the operator, take [`Caller::Operator`]'s grants.

use crate::alias::Alias;
use crate::config::{Access, Config, Principal, PrincipalLabel};

/// The verified caller of one request.
#[derive(Clone, Debug)]
pub enum Caller {
    /// The account running mailgate: stdio, the CLI, or the loopback bearer mode.
    Operator,
    /// A person the resource server verified, as the first principal their token matched.
    Person(Person),
}

/// A person's grants, copied from their principal (the config outlives no request anyway, and a
/// copy keeps the caller free of lifetimes).
#[derive(Clone, Debug)]
pub struct Person {
    label: PrincipalLabel,
    grants: Vec<(Alias, Access)>,
}

/// An alias this request's caller may reach, at the access it may use. Private fields: only
/// [`Caller`] makes one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantedAlias {
    alias: Alias,
    access: Access,
}

impl std::fmt::Display for GrantedAlias {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.alias.as_str())
    }
}

impl GrantedAlias {
    pub fn alias(&self) -> &Alias {
        &self.alias
    }

    /// The narrower of the alias's own access and the caller's grant.
    pub fn access(&self) -> Access {
        self.access
    }

    pub fn as_str(&self) -> &str {
        self.alias.as_str()
    }
}

/// A grant made without a caller, for the main crate's unit tests of the registry and the
/// index readers (test builds only: the `test-support` feature is enabled by the main crate's
/// dev-dependencies alone).
#[cfg(any(test, feature = "test-support"))]
pub fn test_grant(alias: &Alias, access: Access) -> GrantedAlias {
    GrantedAlias {
        alias: alias.clone(),
        access,
    }
}

impl Caller {
    /// The caller a principal's verified token makes.
    pub fn person(principal: &Principal) -> Caller {
        Caller::Person(Person {
            label: principal.label.clone(),
            grants: principal
                .grants
                .iter()
                .map(|g| (g.alias.clone(), g.access))
                .collect(),
        })
    }

    /// The principal's label, for logs, the journal and `policy explain`; `None` for the operator.
    pub fn label(&self) -> Option<&PrincipalLabel> {
        match self {
            Caller::Operator => None,
            Caller::Person(p) => Some(&p.label),
        }
    }

    /// What a continuation cursor is bound to besides the tool, alias and request, so a cursor
    /// issued to one caller is refused when another presents it.
    pub fn binding(&self) -> String {
        match self {
            Caller::Operator => "operator".to_owned(),
            Caller::Person(p) => format!("person:{}", p.label),
        }
    }

    /// `alias`, if this caller may reach it (and it is allowlisted).
    pub fn grant(&self, config: &Config, alias: &Alias) -> Option<GrantedAlias> {
        let own = config.mailbox(alias)?.access;
        let access = match self {
            Caller::Operator => own,
            Caller::Person(p) => {
                let (_, granted) = p.grants.iter().find(|(a, _)| a == alias)?;
                narrower(own, *granted)
            }
        };
        Some(GrantedAlias {
            alias: alias.clone(),
            access,
        })
    }

    /// Every alias this caller may reach, in the allowlist's order: the "all mailboxes" of the
    /// fan-out and batch defaults, `list_allowed_mailboxes`, resources and completions.
    pub fn granted(&self, config: &Config) -> Vec<GrantedAlias> {
        config
            .mailboxes
            .iter()
            .filter_map(|m| self.grant(config, &m.alias))
            .collect()
    }
}

fn narrower(a: Access, b: Access) -> Access {
    if a == Access::Read || b == Access::Read {
        Access::Read
    } else {
        Access::Full
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn config() -> Config {
        Config::from_json(
            br#"{"mailboxes": [
                {"alias": "finance", "address": "finance@example.com"},
                {"alias": "support", "address": "support@example.com", "access": "read"},
                {"alias": "legal", "address": "legal@example.com"}],
             "principals": [
                {"label": "ana", "match": {"sub": "a-1"}, "aliases": ["finance"], "access": "full"},
                {"label": "cy", "match": {"email": "cy@example.org"}, "aliases": ["finance", "support"]},
                {"label": "bo", "match": {"group": "legal-team"}, "aliases": ["legal"]}]}"#,
            Path::new("/etc/mailgate"),
        )
        .expect("valid")
    }

    fn names(granted: &[GrantedAlias]) -> Vec<(&str, Access)> {
        granted.iter().map(|g| (g.as_str(), g.access())).collect()
    }

    #[test]
    fn the_operator_reaches_every_alias_at_its_own_access() {
        let config = config();
        assert_eq!(
            names(&Caller::Operator.granted(&config)),
            [
                ("finance", Access::Full),
                ("support", Access::Read),
                ("legal", Access::Full)
            ]
        );
        assert_eq!(Caller::Operator.binding(), "operator");
        assert!(Caller::Operator.label().is_none());
    }

    #[test]
    fn a_person_reaches_only_their_principals_aliases_never_wider() {
        let config = config();
        let ana = Caller::person(&config.principals[0]);
        assert_eq!(names(&ana.granted(&config)), [("finance", Access::Full)]);
        let cy = Caller::person(&config.principals[1]);
        assert_eq!(
            names(&cy.granted(&config)),
            [("finance", Access::Read), ("support", Access::Read)],
            "read unless the principal says full"
        );
        let legal = Alias::parse("legal").expect("alias");
        assert!(ana.grant(&config, &legal).is_none());
        assert!(cy.grant(&config, &legal).is_none());
        let bo = Caller::person(&config.principals[2]);
        assert_eq!(names(&bo.granted(&config)), [("legal", Access::Read)]);
        let finance = Alias::parse("finance").expect("alias");
        assert!(bo.grant(&config, &finance).is_none());
        assert_eq!(bo.binding(), "person:bo");
        assert_ne!(ana.binding(), bo.binding());
        let payroll = Alias::parse("payroll").expect("alias");
        assert!(Caller::Operator.grant(&config, &payroll).is_none());
    }
}
