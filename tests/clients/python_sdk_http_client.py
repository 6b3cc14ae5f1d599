"""The official Python MCP SDK (`mcp` on PyPI) against `mailgate serve --http` on the demo mailboxes.

Usage: OUTLOOK_HTTP_BEARER_TOKEN=<token> python python_sdk_http_client.py http://127.0.0.1:PORT/mcp
The server must already be running, with every gate open (tests/it/real_clients.rs starts it).
The SDK's Streamable HTTP client gets the bearer token the way its docs say: through the
`httpx2.AsyncClient` handed to `streamable_http_client`. A wrong token must not get past
`initialize` (HTTP 401 with `WWW-Authenticate: Bearer`); the catalog must be exactly the twelve
read tools; read calls answer; a write or send tool is a protocol error. Prints one line per check;
exits 1 at the first failed check.
"""

import asyncio
import os
import sys

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
from mcp.shared.exceptions import MCPError

from mailgate_checks import check, read_calls, surface_calls

TWELVE = 12
GATED = ["create_draft", "send_email", "move_messages", "create_attachment_handoff"]


def failed_checks(error: BaseException):
    """The failed checks in `error`, however deep in exception groups."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from failed_checks(inner)
    elif isinstance(error, AssertionError):
        yield error


def http_client(token: str, responses: list) -> httpx2.AsyncClient:
    """The SDK's default timeouts, the bearer header, and a hook that records each response."""

    async def record(response: httpx2.Response) -> None:
        responses.append(response)

    return httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        event_hooks={"response": [record]},
    )


async def wrong_token(url: str, token: str) -> None:
    responses: list = []
    async with http_client(f"not-{token}", responses) as client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                try:
                    await session.initialize()
                    raise AssertionError("initialize succeeded with a wrong token")
                except MCPError as error:
                    refusal = error.error
    statuses = [r.status_code for r in responses]
    check(statuses == [401], f"wrong token: HTTP statuses {statuses}")
    check(
        responses[0].headers.get("www-authenticate") == "Bearer",
        f"wrong token: WWW-Authenticate {responses[0].headers.get('www-authenticate')}",
    )
    print(f"ok wrong token: HTTP 401, initialize raised {refusal.code} {refusal.message!r}")


async def main(url: str, token: str) -> None:
    await wrong_token(url, token)

    responses: list = []
    async with http_client(token, responses) as client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                check(init.server_info.name == "mailgate", f"server: {init.server_info}")
                check(
                    all("mcp-session-id" not in r.headers for r in responses),
                    "stateless: the server sent a session id",
                )
                print(f"ok initialize: {init.server_info.name} {init.server_info.version}, no session id")

                tools = (await session.list_tools()).tools
                names = sorted(tool.name for tool in tools)
                check(len(names) == TWELVE, f"tools ({len(names)}): {names}")
                check(
                    all(tool.annotations and tool.annotations.read_only_hint for tool in tools),
                    "a listed tool is not read-only",
                )
                print(f"ok tools/list: {len(names)} read-only tools")

                aliases = await read_calls(session)
                await surface_calls(session, "read")
                check(sorted(aliases) == ["archive", "finance", "personal", "support"], f"aliases: {aliases}")

                for name in GATED:
                    try:
                        await session.call_tool(name, {})
                        raise AssertionError(f"{name} answered")
                    except MCPError as error:
                        check(
                            error.error.code == -32602 and f"tool {name} is not in this catalog" in error.error.message,
                            f"{name}: {error.error}",
                        )
                print(f"ok {len(GATED)} gated tools are protocol errors")
    print("python sdk http client: all checks passed")


if __name__ == "__main__":
    token = os.environ.get("OUTLOOK_HTTP_BEARER_TOKEN", "")
    if len(sys.argv) != 2 or not token:
        sys.exit(
            "usage: OUTLOOK_HTTP_BEARER_TOKEN=<token> python python_sdk_http_client.py http://127.0.0.1:PORT/mcp"
        )
    try:
        asyncio.run(main(sys.argv[1], token))
    except (AssertionError, ExceptionGroup) as error:
        # A check that fails inside the SDK's task groups arrives wrapped in exception groups.
        found = list(failed_checks(error))
        if not found:
            raise
        for failure in found:
            print(f"FAILED: {failure}")
        sys.exit(1)
