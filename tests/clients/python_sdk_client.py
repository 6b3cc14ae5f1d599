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

from mailgate_checks import check, read_calls, surface_calls

TWENTY = 20


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

            await read_calls(session)
            await surface_calls(session, os.environ.get("MAILGATE_EXPECT_CATALOG", "read+handoffs+writes+send"))

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
