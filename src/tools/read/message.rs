//! `get_message`: one whole message, its body bounded and its recipient and attachment lists
//! paged, so no sender-sized list can grow the answer past a bound the tests compute.

use super::attachments::no_offsets_with_cursor;
use crate::backends::MessageDetail;
use crate::tools::CallScope;
use crate::tools::args::{GetMessageArgs, MessageFormat};
use crate::tools::cursor;
use crate::tools::output::{
    self, AttachmentOut, GetMessageOut, MessageOut, MessageSummaryOut, bounded,
};
use crate::tools::{ToolError, ToolOutput};

pub(super) async fn get_message(
    app: CallScope,
    args: GetMessageArgs,
) -> Result<ToolOutput, ToolError> {
    let resolved = app.resolve(&args.mailbox)?;
    let request = serde_json::json!({
        "messageId": args.message_id,
        "format": args.format.map(|f| format!("{f:?}")),
    });
    let binding = cursor::Binding {
        signer: app.cursor_signer(),
        tool: "get_message",
        alias: resolved.alias.as_str(),
        request: &request,
    };
    let mut args = args;
    if let Some(c) = &args.cursor {
        no_offsets_with_cursor(args.offset.is_some() || args.recipient_offset.is_some())?;
        let at = cursor::redeem(&binding, c)?;
        args.offset = Some(at.first);
        args.recipient_offset = Some(at.second);
    }
    let detail = resolved.backend.get_message(&args.message_id).await?;
    let message = message_out(&detail, &args, app.config.limits.max_body_chars);
    // Where the answer stopped: the body's next character (its end when it is whole) and the
    // next To/Cc address (past both lists when they are whole).
    let next_cursor = (message.next_offset.is_some() || message.next_recipient_offset.is_some())
        .then(|| {
            let recipients = detail.to.len().max(detail.cc.len()) as u64;
            cursor::issue(
                &binding,
                cursor::Position {
                    first: message.next_offset.unwrap_or(message.body_total_chars),
                    second: message.next_recipient_offset.unwrap_or(recipients),
                },
            )
        });
    let summary = format!(
        "Message {} from mailbox {}.",
        args.message_id, resolved.alias
    );
    Ok(ToolOutput::untrusted(
        summary,
        GetMessageOut {
            mailbox: resolved.alias.to_string(),
            message,
            next_cursor,
        },
    ))
}

/// The `get_message` projection: the body slice of `args.offset`, and every sender-sized list
/// (attachments, To, Cc) cut to its bound, flagged, with its full length and where to read on.
fn message_out(detail: &MessageDetail, args: &GetMessageArgs, max_body: usize) -> MessageOut {
    // Counted and sliced in place: a long body (up to `mime::MAX_BODY_CHARS`) is never copied
    // into a char array to show one page of it.
    let body = detail.body_text.replace("\r\n", "\n");
    let total = body.chars().count() as u64;
    let offset = args.offset.unwrap_or(0).min(total);
    let end = (offset + max_body as u64).min(total);
    let want_body = args.format.unwrap_or_default() == MessageFormat::Text;
    let start = body
        .char_indices()
        .nth(offset as usize)
        .map_or(body.len(), |(at, _)| at);
    let slice: String = body[start..]
        .chars()
        .take((end - offset) as usize)
        .collect();
    let more = end < total;
    let all = &detail.summary.attachments;
    let shown = output::page(all, 0, output::MESSAGE_ATTACHMENTS);
    let attachments = shown
        .items
        .iter()
        .map(|a| AttachmentOut::from_meta(a, output::ATTACHMENT_NAME_CHARS))
        .collect();
    let from = usize::try_from(args.recipient_offset.unwrap_or(0)).unwrap_or(usize::MAX);
    let to = output::page(&detail.to, from, output::MESSAGE_RECIPIENTS);
    let cc = output::page(&detail.cc, from, output::MESSAGE_RECIPIENTS);
    let next_recipient = to.next.max(cc.next);
    let mut summary = MessageSummaryOut::from_summary(&detail.summary, false);
    summary.attachments_truncated = shown.next.is_some();
    MessageOut {
        summary,
        to: to
            .items
            .iter()
            .map(output::AddressOut::from_mailbox)
            .collect(),
        cc: cc
            .items
            .iter()
            .map(output::AddressOut::from_mailbox)
            .collect(),
        internet_message_id: detail
            .internet_message_id
            .as_deref()
            .map(|m| bounded(m, 998)),
        in_reply_to: detail.in_reply_to.as_deref().map(|m| bounded(m, 998)),
        content_type: "text",
        body_source: if detail.body_is_html { "html" } else { "text" },
        body: want_body.then_some(slice),
        body_offset: offset,
        body_total_chars: total,
        body_truncated: want_body && more,
        next_offset: (want_body && more).then_some(end),
        attachments,
        attachments_total: all.len(),
        to_total: to.total,
        cc_total: cc.total,
        // Also when the parser kept only the first MAX_ADDRESSES of a list: then the totals are
        // lower bounds and no page reaches the end.
        recipients_truncated: next_recipient.is_some() || detail.recipients_cut,
        next_recipient_offset: next_recipient.map(|n| n as u64),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::backends::AttachmentMeta;
    use crate::backends::model::MessageSummary;
    use crate::mime::Mailbox;

    /// A message whose every sender-controlled string is `len` copies of `ch`, with
    /// `attachments` attachments and `recipients` addresses in To and in Cc.
    fn hostile(ch: char, len: usize, attachments: usize, recipients: usize) -> MessageDetail {
        let text = ch.to_string().repeat(len);
        let mailbox = |i: usize| Mailbox {
            name: Some(text.clone()),
            address: Some(format!("{text}{i}@example.org")),
        };
        MessageDetail {
            summary: MessageSummary {
                id: "m".into(),
                folder_id: "INBOX".into(),
                subject: Some(text.clone()),
                from: Some(mailbox(0)),
                received: None,
                sent: None,
                is_read: false,
                is_flagged: false,
                has_attachments: attachments > 0,
                preview: text.clone(),
                attachments: (0..attachments)
                    .map(|i| AttachmentMeta {
                        id: format!("att-{i}"),
                        name: Some(text.clone()),
                        content_type: format!("application/{text}"),
                        size: 1,
                        size_is_estimate: false,
                        is_inline: i % 2 == 0,
                    })
                    .collect(),
                attachments_listed: true,
                gap: None,
                categories: Vec::new(),
            },
            recipients_cut: false,
            to: (0..recipients).map(mailbox).collect(),
            cc: (0..recipients).map(mailbox).collect(),
            body_text: ch.to_string().repeat(20_000),
            body_is_html: false,
            internet_message_id: Some(text.clone()),
            in_reply_to: Some(text),
            references: Vec::new(),
        }
    }

    /// The most bytes a `get_message` answer can take whatever the sender did, from the
    /// per-field bounds at six JSON bytes per char (`\u0001`): 50 attachments, 50 + 50
    /// addresses, a 12,000-char body, the single fields, and 16 KiB for keys and numbers.
    fn message_bound() -> usize {
        let chars = |max: usize| (max + 3) * 6;
        let attachment = chars(output::ATTACHMENT_NAME_CHARS) + chars(output::CONTENT_TYPE_CHARS);
        let address = 2 * chars(output::ADDRESS_CHARS);
        output::MESSAGE_ATTACHMENTS * attachment
            + 2 * output::MESSAGE_RECIPIENTS * address
            + 12_000 * 6
            + chars(output::SUBJECT_CHARS)
            + chars(output::PREVIEW_CHARS)
            + address
            + 2 * chars(998)
            + 16 * 1024
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        // See: issue 8, finding 3. Oracle on output size: no list the sender sizes can grow
        // the answer past a bound computed from the per-field bounds.
        #[test]
        fn issue_8_get_message_answers_are_bounded_whatever_the_lists(
            ch in prop::sample::select(vec!['a', '\u{e9}', '\u{1D538}', '"', '\\', '\u{1}']),
            len in 0usize..400,
            attachments in 0usize..2_000,
            recipients in 0usize..1_000,
            recipient_offset in 0u64..1_200,
            headers in any::<bool>(),
        ) {
            let detail = hostile(ch, len, attachments, recipients);
            let args = GetMessageArgs {
                mailbox: "a".into(),
                message_id: "m".into(),
                offset: None,
                format: headers.then_some(MessageFormat::Headers),
                recipient_offset: Some(recipient_offset),
                cursor: None,
            };
            let out = message_out(&detail, &args, 12_000);
            let bytes = serde_json::to_vec(&out).map(|v| v.len()).unwrap_or(usize::MAX);
            prop_assert!(bytes <= message_bound(), "{} > {}", bytes, message_bound());
            prop_assert_eq!(out.attachments.len(), attachments.min(output::MESSAGE_ATTACHMENTS));
            prop_assert_eq!(out.attachments_total, attachments);
            prop_assert_eq!(
                out.summary.attachments_truncated,
                attachments > output::MESSAGE_ATTACHMENTS
            );
            let from = (recipient_offset as usize).min(recipients);
            let shown = (recipients - from).min(output::MESSAGE_RECIPIENTS);
            prop_assert_eq!(out.to.len(), shown);
            prop_assert_eq!(out.cc.len(), shown);
            prop_assert_eq!((out.to_total, out.cc_total), (recipients, recipients));
            prop_assert_eq!(out.recipients_truncated, from + shown < recipients);
            prop_assert_eq!(
                out.next_recipient_offset,
                out.recipients_truncated.then_some((from + shown) as u64)
            );
        }
    }
}
