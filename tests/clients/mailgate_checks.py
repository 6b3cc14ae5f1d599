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


async def surface_calls(session: ClientSession, catalog: str) -> None:
    """Resources, templates, completion and prompts (issue 22): the listings, a read of the
    allowlist, the policy (whose catalog is `catalog`) and finance's folders, an alias completed
    from a prefix, and a prompt expanded; an alias off the allowlist is refused by code -32002."""
    import json

    from mcp import types
    from mcp.shared.exceptions import MCPError

    resources = (await session.list_resources()).resources
    uris = {str(r.uri) for r in resources}
    check({"mailgate://mailboxes", "mailgate://policy", "mailgate://finance/folders"} <= uris, f"resources: {uris}")
    templates = [t.uri_template for t in (await session.list_resource_templates()).resource_templates]
    check("mailgate://{alias}/contacts{?query}" in templates, f"templates: {templates}")
    print(f"ok resources/list: {len(uris)} resources, {len(templates)} templates")

    def body(result) -> dict:
        return json.loads(result.contents[0].text)

    mailboxes = body(await session.read_resource("mailgate://mailboxes"))
    check("finance" in mailboxes["mailboxes"], f"mailboxes: {mailboxes}")
    policy = body(await session.read_resource("mailgate://policy"))
    check(policy["catalog"] == catalog, f"policy catalog: {policy['catalog']}")
    folders = body(await session.read_resource("mailgate://finance/folders"))
    check(len(folders["folders"]) > 0, f"folders: {folders}")
    try:
        await session.read_resource("mailgate://nobody/folders")
        raise AssertionError("an alias off the allowlist was read")
    except MCPError as error:
        check(error.error.code == -32002, f"unknown alias: {error.error}")
    print("ok resources/read: mailboxes, policy, folders; unknown alias -32002")

    completed = await session.complete(
        types.ResourceTemplateReference(type="ref/resource", uri="mailgate://{alias}/folders"),
        {"name": "alias", "value": "fin"},
    )
    check(completed.completion.values == ["finance"], f"completion: {completed.completion}")
    print("ok completion/complete: fin -> finance")

    prompts = [p.name for p in (await session.list_prompts()).prompts]
    check(prompts == ["compose_email", "summarize_emails", "triage_inbox", "find_evidence"], f"prompts: {prompts}")
    triage = await session.get_prompt("triage_inbox", {"mailbox": "finance"})
    check("list_messages" in triage.messages[0].content.text, f"triage_inbox: {triage}")
    print("ok prompts/list and prompts/get")
