//! One mailbox's search: criteria to plan (the reference's limit derivation), the choice of
//! source (live, index, hybrid), and the notes an answer carries when it cannot prove absence.
//! `search_mailbox` and `list_messages` answer here; the fan-out and investigate reuse `plan`,
//! `mode_of` and `search_one`.

use crate::backends::model::{Filters, SortBy, SortOrder};
use crate::caller::GrantedAlias;
use crate::config::Limits;
use crate::search::indexed::{self, Answer, Mode, Target};
use crate::search::{SearchOutcome, SearchPlan, SearchStatus, fanout, warning};
use crate::tools::CallScope;
use crate::tools::args::SourceArg;
use crate::tools::args::{Criteria, SearchMailboxArgs, SortByArg, SortOrderArg};
use crate::tools::cursor;
use crate::tools::output::SearchProjection;
use crate::tools::{App, ErrorCode, ToolError, ToolOutput};

/// Turns tool criteria into a search plan with the reference's limit derivation.
pub(super) fn plan(
    criteria: &Criteria,
    limits: &Limits,
    allow_query: bool,
) -> Result<SearchPlan, ToolError> {
    let query = if allow_query {
        criteria
            .query
            .as_deref()
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .map(str::to_owned)
    } else {
        None
    };
    let date_from = criteria
        .date_from
        .as_deref()
        .map(|d| crate::tools::dates::parse(d, false))
        .transpose()
        .map_err(|_| ToolError::new(ErrorCode::InvalidArgument, "dateFrom is not a valid date"))?;
    let date_to = criteria
        .date_to
        .as_deref()
        .map(|d| crate::tools::dates::parse(d, true))
        .transpose()
        .map_err(|_| ToolError::new(ErrorCode::InvalidArgument, "dateTo is not a valid date"))?;
    let (max_results, scan_limit) = SearchPlan::derive_limits(
        query.as_deref(),
        criteria.max_results.map(|n| n as usize),
        limits.max_results_per_mailbox,
    );
    Ok(SearchPlan {
        query,
        folder: criteria.folder.clone(),
        filters: Filters {
            sender: criteria.sender.clone(),
            subject: criteria.subject.clone(),
            date_from,
            date_to,
            has_attachments: criteria.has_attachments,
            is_read: criteria.is_read,
            categories: criteria.categories.clone().unwrap_or_default(),
        },
        max_results,
        scan_limit,
        max_pages: criteria.max_pages.unwrap_or(10),
        sort_by: match criteria.sort_by {
            Some(SortByArg::Subject) => SortBy::Subject,
            _ => SortBy::ReceivedDateTime,
        },
        sort_order: match criteria.sort_order {
            Some(SortOrderArg::Asc) => SortOrder::Asc,
            _ => SortOrder::Desc,
        },
        deadline: crate::tools::call_deadline(crate::search::SEARCH_DEADLINE),
        attachment_names: criteria.include_attachment_names == Some(true),
    })
}

/// Warnings the plan adds to every outcome (no search memory yet, ignored query).
pub(super) fn plan_warnings(
    app: &App,
    criteria: &Criteria,
    allow_query: bool,
) -> Vec<&'static str> {
    let mut w = Vec::new();
    if criteria.expand_terms == Some(true) {
        w.push(if app.config.search_memory_path.is_some() {
            warning::EXPANSION_UNAVAILABLE
        } else {
            warning::MEMORY_NOT_CONFIGURED
        });
    }
    if !allow_query && criteria.query.is_some() {
        w.push("query_ignored");
    }
    w
}

pub(super) fn with_warnings(mut a: Answer, extra: &[&'static str]) -> Answer {
    a.outcome.warnings.extend_from_slice(extra);
    a
}

/// The `source` the caller asked for (none: the default of [`fanout::mode_for`]).
pub(super) fn requested_mode(criteria: &Criteria) -> Option<Mode> {
    criteria.source.map(Mode::from)
}

/// Where one mailbox's call runs: the caller's `source`, else the default; an explicit `index`
/// or `hybrid` on a mailbox without an index is a clear error naming the operator's command.
pub(in crate::tools) async fn mode_of<'a>(
    app: &'a App,
    alias: &GrantedAlias,
    requested: Option<Mode>,
) -> Result<(Mode, Option<&'a crate::index::reader::IndexReader>), ToolError> {
    let index = app.indexes.get(alias).await;
    if index.is_none() && matches!(requested, Some(Mode::Index | Mode::Hybrid)) {
        return Err(ToolError::new(
            ErrorCode::Unsupported,
            format!(
                "source: mailbox {alias} has no index (the operator runs `mailgate index \
                 sync {alias}`); use source \"live\""
            ),
        ));
    }
    Ok((fanout::mode_for(requested, index.is_some()), index))
}

/// One mailbox's search as its `source` says: an explicit `index` or `hybrid` on a mailbox
/// without an index is a clear error naming the operator's command.
pub(super) async fn search_one(
    app: &App,
    resolved: &crate::tools::Resolved<'_>,
    criteria: &Criteria,
    plan: &SearchPlan,
) -> Result<Answer, ToolError> {
    let (mode, index) = mode_of(app, &resolved.granted, requested_mode(criteria)).await?;
    // Categories live on the backend only: the index keeps none, and a backend without them
    // cannot be asked (never a silent ignore).
    let mode = if plan.filters.categories.is_empty() {
        mode
    } else if !resolved.backend.keeps_categories() {
        return Err(ToolError::new(
            ErrorCode::Unsupported,
            format!(
                "criteria.categories: mailbox {} keeps no categories (a Maildir mailbox has none)",
                resolved.alias
            ),
        ));
    } else if criteria.source.is_some_and(|s| s != SourceArg::Live) {
        return Err(ToolError::new(
            ErrorCode::Unsupported,
            "criteria.categories: the local index keeps no categories; use source \"live\"",
        ));
    } else {
        Mode::Live
    };
    let target = Target {
        backend: resolved.backend,
        index,
        max_staleness: app.indexes.max_staleness,
        semantic: app.semantic.as_deref(),
    };
    Ok(indexed::search(target, plan, mode).await)
}

async fn single_search(
    app: CallScope,
    args: SearchMailboxArgs,
    allow_query: bool,
) -> Result<ToolOutput, ToolError> {
    let resolved = app.resolve(&args.mailbox)?;
    // Say why a mailbox of an unbuilt kind cannot search, instead of an uninformative
    // SEARCH_FAILED.
    resolved.backend.ensure_built()?;
    let request = criteria_binding(&args.criteria);
    let binding = cursor::Binding {
        signer: app.cursor_signer(),
        tool: if allow_query {
            "search_mailbox"
        } else {
            "list_messages"
        },
        alias: resolved.alias.as_str(),
        request: &request,
    };
    let skip = binding.start(args.cursor.as_deref())?;
    let mut plan = plan(&args.criteria, &app.config.limits, allow_query)?;
    let page = plan.max_results;
    let skip = usize::try_from(skip).unwrap_or(usize::MAX);
    if !plan.deepen(skip) {
        return Err(ToolError::new(
            ErrorCode::InvalidArgument,
            "cursor: past the deepest continuation (1,000 results); narrow the criteria",
        ));
    }
    let mut answer = with_warnings(
        search_one(&app, &resolved, &args.criteria, &plan).await?,
        &plan_warnings(&app, &args.criteria, allow_query),
    );
    // The messages before the cursor's position were in earlier answers.
    let delivered = skip.min(answer.outcome.messages.len());
    answer.outcome.messages.drain(..delivered);
    if let Some(sources) = &mut answer.sources {
        sources.drain(..delivered.min(sources.len()));
    }
    let more = answer.outcome.truncated && answer.outcome.messages.len() >= page;
    let next = skip + page;
    let outcome = &answer.outcome;
    let with_names = args.criteria.include_attachment_names == Some(true);
    let mut projection = SearchProjection::new(resolved.alias.as_str(), &answer, with_names);
    projection.next_cursor =
        (more && next + page <= crate::search::MAX_CURSOR_DEPTH).then(|| binding.at(next as u64));
    let summary = format!(
        "Mailbox {}: {}, {} result(s).{}",
        resolved.alias,
        outcome.status.as_str(),
        projection.messages.len(),
        unproven_note(outcome)
    );
    let summary = summary + graph_names_note(&projection.warnings) + semantic_note(outcome);
    Ok(ToolOutput::untrusted(summary, projection))
}

/// The warning codes keep the reference's `graph_*` names on every backend (a client written
/// for it reads them unchanged); on a Maildir mailbox that reads like a Graph call, so an
/// answer carrying one says so once.
pub(super) fn graph_names_note<'a>(warnings: impl IntoIterator<Item = &'a String>) -> &'static str {
    if warnings.into_iter().any(|w| w.starts_with("graph_")) {
        " Warning codes graph_* are the reference's names and apply to every backend."
    } else {
        ""
    }
}

/// An answer whose messages are close in meaning only says so in its text.
fn semantic_note(outcome: &SearchOutcome) -> &'static str {
    if outcome.warnings.contains(&indexed::warning::SEMANTIC_ONLY) {
        " No message holds every query word; the messages listed (source semantic) are the \
         closest in meaning: read them before relying on one."
    } else {
        ""
    }
}

/// For an incomplete answer, the limits that left it so (warning codes) and what lifts them.
fn unproven_note(outcome: &SearchOutcome) -> String {
    if outcome.status == SearchStatus::NotFound
        && let Some(total) = outcome.scan.whole_folder()
    {
        return format!(" All {total} messages of the folder were scanned.");
    }
    if outcome.status != SearchStatus::SearchIncomplete {
        return String::new();
    }
    let limits: Vec<&str> = outcome
        .warnings
        .iter()
        .copied()
        .filter(|w| w.starts_with("message_") || *w == warning::DEADLINE)
        .collect();
    let mut note = String::from(" Absence is not proven");
    if let Some(deadline) = outcome.scan.deadline_note() {
        note.push_str(&format!(
            " ({deadline}; narrow with folder/dateFrom/dateTo)"
        ));
    } else if !limits.is_empty() {
        note.push_str(&format!(
            " (limits: {}; messages flagged contentGap were not wholly read: open them with \
             get_message or narrow the search)",
            limits.join(", ")
        ));
    } else if let Some(limit) = outcome.limit_note() {
        note.push_str(&format!(" ({limit})"));
    } else if outcome.truncated {
        note.push_str(" (a scan limit was reached: narrow the search or raise maxResults)");
    }
    note.push('.');
    note
}

pub(super) async fn search_mailbox(
    app: CallScope,
    args: SearchMailboxArgs,
) -> Result<ToolOutput, ToolError> {
    single_search(app, args, true).await
}

pub(super) async fn list_messages(
    app: CallScope,
    args: SearchMailboxArgs,
) -> Result<ToolOutput, ToolError> {
    single_search(app, args, false).await
}

/// What a search cursor is bound to besides the tool and alias: the criteria as parsed (their
/// Debug text is fixed by the type: the same criteria give the same text, whatever order or
/// spelling of defaults the client sent).
pub(super) fn criteria_binding(criteria: &Criteria) -> serde_json::Value {
    serde_json::Value::from(format!("{criteria:?}"))
}

#[cfg(test)]
mod tests {

    use super::*;

    /// The `graph_*` note accompanies exactly the answers that carry a `graph_*` code (a Maildir
    /// search no longer produces one; the remote backends will).
    #[test]
    fn the_graph_names_note_follows_graph_codes() {
        let codes = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(graph_names_note(&codes(&["graph_search_empty"])).contains("graph_*"));
        assert_eq!(graph_names_note(&codes(&["message_too_large"])), "");
        assert_eq!(graph_names_note(&codes(&[])), "");
    }
}
