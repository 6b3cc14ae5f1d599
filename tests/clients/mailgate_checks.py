"""Checks both Python SDK clients run (python_sdk_client.py over stdio, python_sdk_http_client.py
over Streamable HTTP): the read calls every catalog answers on the demo mailboxes, and the helpers
to report a failed check. A failed check raises AssertionError with its message."""

from mcp import ClientSession


def check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def text_of(result) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "text", None))


async def read_calls(session: ClientSession) -> list:
    """list_allowed_mailboxes (with `finance`), search_mailbox in `finance`, get_message on the
    first hit, and an invalid argument answered as a tool result naming the field. Returns the
    aliases list_allowed_mailboxes gave."""
    mailboxes = await session.call_tool("list_allowed_mailboxes", {})
    check(not mailboxes.is_error, f"list_allowed_mailboxes: {text_of(mailboxes)}")
    check(
        "finance" in mailboxes.structured_content["mailboxes"],
        f"list_allowed_mailboxes: {mailboxes.structured_content}",
    )
    print("ok list_allowed_mailboxes")

    found = await session.call_tool(
        "search_mailbox",
        {"mailbox": "finance", "criteria": {"query": "invoice", "maxResults": 3}},
    )
    check(not found.is_error, f"search_mailbox: {text_of(found)}")
    messages = found.structured_content["messages"]
    check(len(messages) > 0, f"search_mailbox found nothing: {found.structured_content}")
    print(f"ok search_mailbox: {found.structured_content['status']}")

    message = await session.call_tool(
        "get_message", {"mailbox": "finance", "messageId": messages[0]["id"]}
    )
    check(not message.is_error, f"get_message: {text_of(message)}")
    print("ok get_message")

    invalid = await session.call_tool(
        "list_messages", {"mailbox": "finance", "criteria": {"maxResults": 0}}
    )
    check(
        invalid.is_error and text_of(invalid).startswith("INVALID_ARGUMENT: criteria.maxResults"),
        f"invalid arguments: {invalid}",
    )
    print("ok invalid arguments are a tool result")
    return mailboxes.structured_content["mailboxes"]
