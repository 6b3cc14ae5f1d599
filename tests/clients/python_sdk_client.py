"""The official Python MCP SDK (`mcp` on PyPI) against mailgate on the demo mailboxes.

Usage: python python_sdk_client.py /path/to/mailgate
The environment must let `mailgate serve` start on the demo with every gate open (set by
tests/it/real_clients.rs); the SDK hands its own safe defaults plus what is given here to the
server. Prints one line per check; exits 1 at the first failed check.
"""

import asyncio
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

TWENTY = 20


def check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def text_of(result) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "text", None))


async def main(mailgate: str) -> None:
    params = StdioServerParameters(
        command=mailgate,
        args=["serve"],
        env=dict(os.environ),
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check(init.server_info.name == "mailgate", f"server: {init.server_info}")
            print(f"ok initialize: {init.server_info.name} {init.server_info.version}")

            tools = (await session.list_tools()).tools
            names = sorted(tool.name for tool in tools)
            check(len(names) == TWENTY, f"tools ({len(names)}): {names}")
            print(f"ok tools/list: {len(names)} tools")

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

            try:
                await session.call_tool("delete_email", {})
                raise AssertionError("an unknown tool answered")
            except MCPError as error:
                check(error.error.code == -32602, f"unknown tool: {error.error}")
            print("ok unknown tool is a protocol error")
    print("python sdk client: all checks passed")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python python_sdk_client.py /path/to/mailgate")
    try:
        asyncio.run(main(os.path.abspath(sys.argv[1])))
    except AssertionError as failure:
        print(f"FAILED: {failure}")
        sys.exit(1)
