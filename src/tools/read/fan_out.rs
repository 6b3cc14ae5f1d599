//! Searching several mailboxes at once: `search_mailboxes` (one criteria over a window of
//! aliases, resumable by cursor) and `search_mailboxes_batch` (labelled queries under one shared
//! budget). Each mailbox is searched by `search::search_one`, so every answer keeps its own
//! evidence status.

use std::sync::Arc;

use futures::StreamExt;

use super::search::{
    criteria_binding, graph_names_note, plan, plan_warnings, requested_mode, with_warnings,
};
use crate::caller::GrantedAlias;
use crate::search::{SearchStatus, fanout, warning};
use crate::tools::CallScope;
use crate::tools::args::{Criteria, SearchBatchArgs, SearchMailboxesArgs};
use crate::tools::cursor;
use crate::tools::output::{
    BatchBudgetOut, BatchLabelOut, BatchOut, MultiSearchOut, SearchProjection,
};
use crate::tools::{App, ErrorCode, ToolError, ToolOutput};

/// Resolves an optional alias list (default: every alias the caller may reach) against the
/// caller's grants.
fn resolve_many(
    app: &CallScope,
    mailboxes: Option<&[String]>,
) -> Result<Vec<GrantedAlias>, ToolError> {
    Ok(match mailboxes {
        Some(list) => list
            .iter()
            .map(|m| app.resolve(m).map(|r| r.granted))
            .collect::<Result<_, _>>()?,
        None => app.granted(),
    })
}

/// The mailboxes one fan-out answer searches: at most `maxMailboxesPerSearch` of `aliases`
/// from `from` on, and where the next answer starts when some are left.
fn mailbox_window(
    app: &App,
    aliases: &[GrantedAlias],
    from: u64,
) -> (Vec<GrantedAlias>, Option<u64>) {
    let cap = app.config.limits.max_mailboxes_per_search.max(1);
    let start = usize::try_from(from)
        .unwrap_or(usize::MAX)
        .min(aliases.len());
    let end = start.saturating_add(cap).min(aliases.len());
    let next = (end < aliases.len()).then_some(end as u64);
    (aliases[start..end].to_vec(), next)
}

/// What a `search_mailboxes` cursor over mailboxes is bound to: the mailboxes as asked (absent
/// means all of the allowlist, which a process never changes) and the criteria.
fn fan_out_request(mailboxes: Option<&[String]>, criteria: &Criteria) -> serde_json::Value {
    serde_json::json!({ "mailboxes": mailboxes, "criteria": criteria_binding(criteria) })
}

/// The alias a fan-out cursor names: none, its mailboxes are in the request.
const FAN_OUT: &str = "*";

/// What `search_mailboxes` with `request` (see [`fan_out_request`]) binds its cursors to; the
/// position is the next mailbox.
fn fan_out_binding<'a>(
    signer: cursor::Signer<'a>,
    request: &'a serde_json::Value,
) -> cursor::Binding<'a> {
    cursor::Binding {
        signer,
        tool: "search_mailboxes",
        alias: FAN_OUT,
        request,
    }
}

async fn fan_out(
    app: &CallScope,
    aliases: &[GrantedAlias],
    criteria: &Criteria,
    slots: Option<&tokio::sync::Semaphore>,
) -> Result<(SearchStatus, Vec<SearchProjection>), ToolError> {
    let plan = plan(criteria, &app.config.limits, true)?;
    let extra = plan_warnings(app, criteria, true);
    let outcomes = fanout::search_all(
        fanout::Sources {
            registry: &app.backends,
            indexes: &app.indexes,
            semantic: app.semantic.as_deref(),
        },
        requested_mode(criteria),
        aliases,
        &plan,
        app.config.limits.max_concurrent_mailboxes,
        slots,
    )
    .await;
    let with_names = criteria.include_attachment_names == Some(true);
    let status = SearchStatus::worst(outcomes.iter().map(|(_, a)| a.outcome.status));
    // A mailbox cut at maxResults goes on through search_mailbox with the same criteria: its
    // cursor is bound to that tool, the alias and these criteria.
    let request = criteria_binding(criteria);
    let projections = outcomes
        .into_iter()
        .map(|(alias, o)| {
            let more = o.outcome.truncated && o.outcome.messages.len() >= plan.max_results;
            let mut p =
                SearchProjection::new(alias.as_str(), &with_warnings(o, &extra), with_names);
            p.next_cursor = more.then(|| {
                let binding = cursor::Binding {
                    signer: app.cursor_signer(),
                    tool: "search_mailbox",
                    alias: alias.as_str(),
                    request: &request,
                };
                binding.at(plan.max_results as u64)
            });
            p
        })
        .collect();
    Ok((status, projections))
}

pub(super) async fn search_mailboxes(
    app: CallScope,
    args: SearchMailboxesArgs,
) -> Result<ToolOutput, ToolError> {
    let aliases = resolve_many(&app, args.mailboxes.as_deref())?;
    let request = fan_out_request(args.mailboxes.as_deref(), &args.criteria);
    let binding = fan_out_binding(app.cursor_signer(), &request);
    let from = binding.start(args.cursor.as_deref())?;
    let (window, next) = mailbox_window(&app, &aliases, from);
    let (status, results) = fan_out(&app, &window, &args.criteria, None).await?;
    // Mailboxes not searched yet prove nothing absent from them.
    let status = match next {
        Some(_) => SearchStatus::worst([status, SearchStatus::SearchIncomplete]),
        None => status,
    };
    let summary = format!(
        "{} mailbox(es) searched: {}.{}{}{}",
        results.len(),
        status.as_str(),
        graph_names_note(results.iter().flat_map(|r| &r.warnings)),
        continuation_note(&results),
        match next {
            Some(n) => format!(
                " {} more mailbox(es) past maxMailboxesPerSearch: pass nextCursor as cursor \
                 with the same arguments to search them.",
                aliases.len() as u64 - n
            ),
            None => String::new(),
        }
    );
    Ok(ToolOutput::untrusted(
        summary,
        MultiSearchOut {
            status,
            results,
            next_cursor: next.map(|n| binding.at(n)),
        },
    ))
}

/// Said once when a mailbox of a fan-out was cut at maxResults.
fn continuation_note(results: &[SearchProjection]) -> &'static str {
    if results.iter().any(|r| r.next_cursor.is_some()) {
        " A mailbox's nextCursor continues it: search_mailbox with that mailbox, the same \
         criteria and cursor."
    } else {
        ""
    }
}

/// What one label adds to the batch totals.
fn label_cost(results: &[SearchProjection]) -> (usize, usize, usize, usize) {
    let messages = results.iter().map(|r| r.messages.len()).sum();
    let attachments = results
        .iter()
        .flat_map(|r| &r.messages)
        .map(|m| m.attachments.as_ref().map_or(0, Vec::len))
        .sum();
    let json = serde_json::to_string(results).unwrap_or_default();
    (messages, attachments, json.chars().count(), json.len())
}

pub(super) async fn search_mailboxes_batch(
    app: CallScope,
    args: SearchBatchArgs,
) -> Result<ToolOutput, ToolError> {
    let limits = &app.config.limits;
    if args.queries.len() > limits.max_queries_per_batch {
        return Err(ToolError::new(
            ErrorCode::LimitExceeded,
            format!(
                "{} queries; at most {} per batch (maxQueriesPerBatch)",
                args.queries.len(),
                limits.max_queries_per_batch
            ),
        ));
    }
    // A continuation runs the labels a budget left, from the first of them.
    let batch_request = serde_json::Value::from(format!("{:?}", args.queries));
    let batch_binding = cursor::Binding {
        signer: app.cursor_signer(),
        tool: "search_mailboxes_batch",
        alias: FAN_OUT,
        request: &batch_request,
    };
    let first = usize::try_from(batch_binding.start(args.cursor.as_deref())?)
        .unwrap_or(usize::MAX)
        .min(args.queries.len());
    // Resolve every label's mailboxes before searching anything; a label over
    // maxMailboxesPerSearch searches the first ones and says where the rest go on.
    let mut labelled = Vec::with_capacity(args.queries.len() - first);
    for q in &args.queries[first..] {
        let aliases = resolve_many(&app, q.mailboxes.as_deref())?;
        let (window, more) = mailbox_window(&app, &aliases, 0);
        labelled.push((q, window, more));
    }
    // Labels run concurrently, but all of them share one bound on concurrent mailbox searches.
    // The stream owns its inputs (no borrowed closures) so the future stays `Send`.
    let slots = Arc::new(tokio::sync::Semaphore::new(
        limits.max_concurrent_mailboxes.max(1),
    ));
    let jobs: Vec<(Criteria, Vec<GrantedAlias>)> = labelled
        .iter()
        .map(|(q, aliases, _)| (q.criteria.clone(), aliases.clone()))
        .collect();
    let mut stream = futures::stream::iter(jobs)
        .map(|(criteria, aliases)| {
            let app = app.clone();
            let slots = Arc::clone(&slots);
            async move { fan_out(&app, &aliases, &criteria, Some(&slots)).await }
        })
        .buffered(limits.max_concurrent_mailboxes.max(1));
    let mut budget = BatchBudgetOut::default();
    let mut results = Vec::with_capacity(labelled.len());
    // Where a continuation starts: the first label past the budget.
    let mut resume: Option<usize> = None;
    let mut alone: Option<String> = None;
    for (i, (q, _, more)) in labelled.iter().enumerate() {
        let label = q.label.clone();
        if budget.exhausted {
            results.push(exhausted_label(label));
            continue;
        }
        let Some(next) = stream.next().await else {
            break;
        };
        let (status, projections) = next?;
        let (m, a, c, b) = label_cost(&projections);
        let over = budget.messages + m > limits.max_batch_result_messages
            || budget.attachments + a > limits.max_batch_attachments
            || budget.context_chars + c > limits.max_batch_context_chars
            || (budget.bytes + b) as u64 > limits.max_batch_result_bytes;
        if over {
            budget.exhausted = true;
            // A label over a budget on its own would stop every continuation at itself: the
            // cursor goes on after it (search_mailboxes runs it alone).
            resume = Some(first + i + usize::from(i == 0));
            alone = (i == 0).then(|| q.label.clone());
            results.push(exhausted_label(label));
            continue;
        }
        budget.messages += m;
        budget.attachments += a;
        budget.context_chars += c;
        budget.bytes += b;
        let mut out = BatchLabelOut {
            label,
            status,
            warnings: Vec::new(),
            results: projections,
            next_cursor: None,
        };
        if let Some(n) = more {
            out.status = SearchStatus::worst([status, SearchStatus::SearchIncomplete]);
            out.warnings.push(warning::MAILBOX_LIMIT.to_owned());
            let request = fan_out_request(q.mailboxes.as_deref(), &q.criteria);
            out.next_cursor = Some(fan_out_binding(app.cursor_signer(), &request).at(*n));
        }
        results.push(out);
    }
    drop(stream);
    let resume = resume.filter(|&at| at < args.queries.len());
    let status = SearchStatus::worst(results.iter().map(|r| r.status));
    let summary = format!(
        "{} label(s){}: {}{}{}.",
        results.len(),
        if first > 0 {
            format!(" from label {}", first + 1)
        } else {
            String::new()
        },
        status.as_str(),
        if budget.exhausted {
            " (a result budget was exhausted)"
        } else {
            ""
        },
        if resume.is_some() {
            "; pass nextCursor as cursor with the same queries to run the labels it left"
        } else {
            ""
        }
    );
    let summary = match alone {
        Some(label) => format!(
            "{summary} Label {label} is over a batch budget on its own: run it with \
             search_mailboxes."
        ),
        None => summary,
    };
    let summary = summary
        + graph_names_note(
            results
                .iter()
                .flat_map(|l| &l.results)
                .flat_map(|r| &r.warnings),
        );
    let next_cursor = resume.map(|at| batch_binding.at(at as u64));
    Ok(ToolOutput::untrusted(
        summary,
        BatchOut {
            status,
            results,
            budget,
            next_cursor,
        },
    ))
}

fn exhausted_label(label: String) -> BatchLabelOut {
    BatchLabelOut {
        label,
        status: SearchStatus::SearchIncomplete,
        warnings: vec![warning::BUDGET_EXHAUSTED.to_owned()],
        results: Vec::new(),
        next_cursor: None,
    }
}
