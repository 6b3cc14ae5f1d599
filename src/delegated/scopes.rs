//! The scopes a delegated sign-in asks for (issue 37): decided by the catalog the gates build,
//! never by the config file, so a grant is never wider than what the tools can use, and
//! `policy/delegated.json` shows a reviewer each catalog's scopes from this one table.
//!
//! Invariant: the read catalog never asks for a scope that can change or send mail; writes add
//! only the mailbox's read-write scope; send adds only the send scope. A scope that lets a token
//! be refreshed (`offline_access`) and the identity scopes the login needs to check the account
//! (`openid email`) are asked for on every catalog.
//!
//! Who calls it: the login (`mailgate auth login`) and `report::delegated_json`.

/// What the grant is for: the provider and which protocol the backend speaks with it. A generic
/// OpenID Connect provider is not here: its scope names are its own, so its config names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScopeTarget {
    /// Microsoft Graph, delegated (Outlook.com and Microsoft 365).
    MicrosoftGraph,
    /// Microsoft Graph, delegated, for a mailbox shared with the signed-in account (the
    /// config's `delegatedFrom`): Graph's `.Shared` scopes, which a mailbox's own scopes do
    /// not cover.
    MicrosoftGraphShared,
    /// Outlook IMAP and SMTP (XOAUTH2 / OAUTHBEARER) on `outlook.office.com`.
    MicrosoftImap,
    /// Gmail IMAP and SMTP.
    GoogleImap,
}

impl ScopeTarget {
    pub(crate) const ALL: [ScopeTarget; 4] = [
        ScopeTarget::MicrosoftGraph,
        ScopeTarget::MicrosoftGraphShared,
        ScopeTarget::MicrosoftImap,
        ScopeTarget::GoogleImap,
    ];

    /// The name `policy/delegated.json` files it under.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ScopeTarget::MicrosoftGraph => "microsoft/graph",
            ScopeTarget::MicrosoftGraphShared => "microsoft/graph (delegatedFrom)",
            ScopeTarget::MicrosoftImap => "microsoft/imap",
            ScopeTarget::GoogleImap => "google/imap",
        }
    }
}

/// The identity and refresh scopes of every Microsoft sign-in.
const MICROSOFT_BASE: &[&str] = &["openid", "email", "offline_access"];
const GRAPH: &str = "https://graph.microsoft.com/";
const OUTLOOK: &str = "https://outlook.office.com/";

/// The scopes to ask for, in a fixed order, for `target` and the catalog the gates build
/// (`writes`, `send`; handoffs need no mailbox scope).
pub(crate) fn requested(target: ScopeTarget, writes: bool, send: bool) -> Vec<String> {
    let mut scopes: Vec<String> = Vec::new();
    match target {
        ScopeTarget::MicrosoftGraph | ScopeTarget::MicrosoftGraphShared => {
            let shared = if target == ScopeTarget::MicrosoftGraphShared {
                ".Shared"
            } else {
                ""
            };
            scopes.extend(MICROSOFT_BASE.iter().map(|s| (*s).to_owned()));
            let mail = if writes {
                "Mail.ReadWrite"
            } else {
                "Mail.Read"
            };
            scopes.push(format!("{GRAPH}{mail}{shared}"));
            if send {
                scopes.push(format!("{GRAPH}Mail.Send{shared}"));
            }
        }
        ScopeTarget::MicrosoftImap => {
            scopes.extend(MICROSOFT_BASE.iter().map(|s| (*s).to_owned()));
            // IMAP has no read-only scope: writes are refused by the gate, not by the grant.
            scopes.push(format!("{OUTLOOK}IMAP.AccessAsUser.All"));
            if send {
                scopes.push(format!("{OUTLOOK}SMTP.Send"));
            }
        }
        ScopeTarget::GoogleImap => {
            // Gmail's IMAP and SMTP take one scope, full mail access; Google issues a refresh
            // token when the request says `access_type=offline`, not by a scope.
            scopes.extend(["openid", "email", "https://mail.google.com/"].map(str::to_owned));
        }
    }
    scopes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every gate combination: read never asks to change or send, and each gate adds only its
    /// own scope.
    #[test]
    fn scopes_follow_the_catalog_and_nothing_wider() {
        for target in ScopeTarget::ALL {
            for writes in [false, true] {
                for send in [false, true] {
                    let scopes = requested(target, writes, send);
                    let graph = matches!(
                        target,
                        ScopeTarget::MicrosoftGraph | ScopeTarget::MicrosoftGraphShared
                    );
                    let suffix = if target == ScopeTarget::MicrosoftGraphShared {
                        ".Shared"
                    } else {
                        ""
                    };
                    let has = |s: &str| {
                        let s = if s.starts_with("Mail.") {
                            format!("{s}{suffix}")
                        } else {
                            s.to_owned()
                        };
                        scopes.iter().any(|x| x.ends_with(&s))
                    };
                    assert!(has("openid") && has("email"), "{target:?}");
                    if target != ScopeTarget::GoogleImap {
                        assert!(has("offline_access"), "{target:?}");
                    }
                    let sends = has("Mail.Send") || has("SMTP.Send");
                    // Gmail's one scope covers SMTP: send adds nothing there.
                    assert_eq!(
                        sends,
                        send && target != ScopeTarget::GoogleImap,
                        "{target:?}"
                    );
                    assert_eq!(has("Mail.ReadWrite"), writes && graph);
                    if graph {
                        assert_eq!(has("Mail.Read"), !writes);
                    }
                    // A mailbox's own grant never reaches shared mailboxes, and a shared one
                    // never asks for the delegate's own mailbox.
                    let shared = scopes.iter().any(|x| x.ends_with(".Shared"));
                    assert_eq!(shared, target == ScopeTarget::MicrosoftGraphShared);
                    let mut unique = scopes.clone();
                    unique.sort();
                    unique.dedup();
                    assert_eq!(unique.len(), scopes.len(), "no scope twice");
                }
            }
        }
    }
}
