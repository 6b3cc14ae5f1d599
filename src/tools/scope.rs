//! The app as one call's caller may use it (issue 29, item 1). Every handler receives a
//! [`CallScope`], not the bare [`App`]: mailbox lookups ([`CallScope::resolve`] and its write
//! forms) and the "all mailboxes" defaults ([`CallScope::granted`]) go through the caller's
//! grants (`crate::caller`), and the backend registry and index readers open only for a
//! [`GrantedAlias`], which only the caller's grants make. So a person's call reaches only the
//! aliases their principal lists, and an alias outside them is refused exactly like one that is
//! not on the allowlist: the answer does not tell the two apart.
//!
//! Who may call it: `App::call` makes one scope per call; handlers clone it into the tasks they
//! spawn.

use std::ops::Deref;
use std::sync::Arc;

use super::{App, ErrorCode, ToolError};
use crate::alias::Alias;
use crate::backends::{Backend, Writer};
use crate::caller::{Caller, GrantedAlias};
use crate::config::{Access, MailboxEntry};

/// One call's view of the app: the shared [`App`] and the caller it runs for.
#[derive(Clone)]
pub(crate) struct CallScope {
    app: Arc<App>,
    caller: Arc<Caller>,
    /// `caller.binding()`, made once per call.
    cursor_caller: Arc<str>,
}

/// A mailbox a handler may use: the granted alias, its config entry and its pinned backend.
pub(crate) struct Resolved<'a> {
    pub(crate) alias: Alias,
    pub(crate) granted: GrantedAlias,
    pub(crate) entry: &'a MailboxEntry,
    pub(crate) backend: &'a Backend,
}

impl Deref for CallScope {
    type Target = App;

    fn deref(&self) -> &App {
        &self.app
    }
}

impl CallScope {
    pub(crate) fn new(app: Arc<App>, caller: Arc<Caller>) -> Self {
        let cursor_caller = caller.binding().into();
        Self {
            app,
            caller,
            cursor_caller,
        }
    }

    pub(crate) fn caller(&self) -> &Caller {
        &self.caller
    }

    /// What signs and checks continuation cursors: the caller they are bound to besides tool,
    /// alias and request, and the instance's key ring (`cursor`).
    pub(crate) fn cursor_signer(&self) -> crate::tools::cursor::Signer<'_> {
        crate::tools::cursor::Signer {
            caller: &self.cursor_caller,
            keys: &self.app.coordination.cursor_keys,
        }
    }

    /// `mailbox` (any case) if the caller may reach it; `None` for an alias off the allowlist
    /// and for one outside the caller's grants alike.
    pub(crate) fn grant(&self, mailbox: &str) -> Option<GrantedAlias> {
        let alias = Alias::parse(&mailbox.to_lowercase()).ok()?;
        self.caller.grant(&self.app.config, &alias)
    }

    /// Every alias the caller may reach, in the allowlist's order.
    pub(crate) fn granted(&self) -> Vec<GrantedAlias> {
        self.caller.granted(&self.app.config)
    }

    /// Looks an alias up in the caller's grants; an unknown or ungranted alias fails before any
    /// backend is touched, with the same answer.
    pub(crate) fn resolve(&self, mailbox: &str) -> Result<Resolved<'_>, ToolError> {
        let unknown = || {
            ToolError::new(
                ErrorCode::UnknownMailbox,
                "the mailbox alias is not on the allowlist",
            )
        };
        let granted = self.grant(mailbox).ok_or_else(unknown)?;
        let entry = self
            .app
            .config
            .mailbox(granted.alias())
            .ok_or_else(unknown)?;
        let backend = self.app.backends.get(&granted).ok_or_else(unknown)?;
        Ok(Resolved {
            alias: granted.alias().clone(),
            granted,
            entry,
            backend,
        })
    }

    /// As [`CallScope::resolve`], and refuses aliases narrowed to `read` (catalog.md
    /// "Per-alias narrowing", or a principal's read grant); used by every write and handoff
    /// tool.
    pub(crate) fn resolve_for_change(&self, mailbox: &str) -> Result<Resolved<'_>, ToolError> {
        let resolved = self.resolve(mailbox)?;
        if resolved.granted.access() == Access::Read {
            return Err(ToolError::new(
                ErrorCode::PolicyDenied,
                "this mailbox is narrowed to read access (plugin.json \"access\": \"read\")",
            ));
        }
        Ok(resolved)
    }

    /// As [`CallScope::resolve_for_change`], with the mailbox's write handle: the only way a
    /// handler reaches a backend's writes. `None` from the registry means startup did not grant
    /// writes to this alias (the write gate is closed), which the catalog already prevents.
    pub(crate) fn resolve_writer(
        &self,
        mailbox: &str,
    ) -> Result<(Resolved<'_>, Writer<'_>), ToolError> {
        let resolved = self.resolve_for_change(mailbox)?;
        let writer = self.app.backends.writer(&resolved.granted).ok_or_else(|| {
            ToolError::new(
                ErrorCode::PolicyDenied,
                "writes are not enabled for this mailbox in this process",
            )
        })?;
        Ok((resolved, writer))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::{Value, json};

    use super::*;
    use crate::config::Config;
    use crate::tools::testutil::demo_app;
    use crate::tools::{CallError, ToolOutput};

    /// A person `ana` whose principal lists `aliases` of the demo's allowlist.
    fn person(aliases: &[&str]) -> Arc<Caller> {
        named("ana", aliases)
    }

    fn named(label: &str, aliases: &[&str]) -> Arc<Caller> {
        let config = Config::from_json(
            json!({
                "mailboxes": [
                    {"alias": "finance", "address": "finance@example.com"},
                    {"alias": "personal", "address": "personal@example.com"}
                ],
                "principals": [{"label": label, "match": {"sub": label}, "aliases": aliases}]
            })
            .to_string()
            .as_bytes(),
            Path::new("/etc/mailgate"),
        )
        .expect("config");
        Arc::new(Caller::person(&config.principals[0]))
    }

    async fn call(app: &Arc<App>, caller: &Arc<Caller>, tool: &str, args: Value) -> Value {
        let raw = args.as_object().cloned().expect("object");
        match app.call(Arc::clone(caller), tool, raw).await {
            Ok(ToolOutput { structured, .. }) => structured,
            Err(CallError::Tool(e)) => json!({"error": e.code.as_str(), "message": e.message}),
            Err(other) => panic!("{tool}: {other:?}"),
        }
    }

    /// Item 1's promise at the tool core: every path to a mailbox goes through the grants, and a
    /// refused alias is answered exactly like an alias that does not exist.
    #[tokio::test]
    async fn a_person_reaches_only_their_aliases_and_learns_nothing_of_the_rest() {
        let demo = demo_app();
        let ana = person(&["finance"]);
        let scope = CallScope::new(Arc::clone(&demo.app), Arc::clone(&ana));
        assert!(scope.resolve("FINANCE").is_ok());
        let others = scope.resolve("personal").err().expect("not granted");
        let unknown = scope.resolve("payroll").err().expect("not allowlisted");
        assert_eq!(others.code, ErrorCode::UnknownMailbox);
        assert_eq!(
            (others.code, &others.message),
            (unknown.code, &unknown.message)
        );
        let names: Vec<String> = scope.granted().iter().map(|g| g.to_string()).collect();
        assert_eq!(names, ["finance"]);
        // A principal's grant is read unless the file says full: no write through it.
        let change = scope
            .resolve_for_change("finance")
            .err()
            .expect("read grant");
        assert_eq!(change.code, ErrorCode::PolicyDenied);

        let listed = call(&demo.app, &ana, "list_allowed_mailboxes", json!({})).await;
        assert_eq!(listed["mailboxes"], json!(["finance"]), "{listed}");
        let refused = call(
            &demo.app,
            &ana,
            "list_folders",
            json!({"mailbox": "personal"}),
        )
        .await;
        assert_eq!(refused["error"], "UNKNOWN_MAILBOX", "{refused}");
        // The fan-out's "all mailboxes" is the person's all.
        let all = call(
            &demo.app,
            &ana,
            "search_mailboxes",
            json!({"criteria": {"query": "invoice"}}),
        )
        .await;
        let searched: Vec<&str> = all["results"]
            .as_array()
            .expect("results")
            .iter()
            .filter_map(|r| r["mailbox"].as_str())
            .collect();
        assert_eq!(searched, ["finance"], "{all}");
        // The operator still reaches every mailbox.
        let operator = Arc::new(Caller::Operator);
        let every = call(&demo.app, &operator, "list_allowed_mailboxes", json!({})).await;
        assert!(
            every["mailboxes"].as_array().expect("list").len() > 1,
            "{every}"
        );
    }

    /// A cursor is bound to its caller: one issued to the operator (or another person) for the
    /// same tool, alias and request does not verify for this person.
    #[tokio::test]
    async fn a_cursor_issued_to_one_caller_is_refused_for_another() {
        let demo = demo_app();
        let operator = Arc::new(Caller::Operator);
        let ana = person(&["finance", "personal"]);
        let bo = named("bo", &["finance", "personal"]);
        let args = json!({"mailbox": "finance", "criteria": {"maxResults": 1}});
        let first = call(&demo.app, &ana, "search_mailbox", args.clone()).await;
        let cursor = first["nextCursor"]
            .as_str()
            .expect("a second page")
            .to_owned();
        let mut next = args.clone();
        next["cursor"] = json!(cursor);
        let again = call(&demo.app, &ana, "search_mailbox", next.clone()).await;
        assert!(
            again.get("error").is_none(),
            "the same caller goes on: {again}"
        );
        for other in [&operator, &bo] {
            let refused = call(&demo.app, other, "search_mailbox", next.clone()).await;
            assert_eq!(refused["error"], "INVALID_ARGUMENT", "{refused}");
        }
    }
}
