"""The official Python MCP SDK reading index answers (issue 21): `source` per hit and
`indexedThrough`, on a mailbox the test synced with `mailgate index sync`.

Usage: python python_sdk_index_client.py /path/to/mailgate
The environment points `mailgate serve` at a config whose alias `finance` is indexed (set by
tests/it/index.rs). Prints one line per check; exits 1 at the first failed check.
"""

import asyncio
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from mailgate_checks import check


async def search(session: ClientSession, source: str) -> dict:
    result = await session.call_tool(
        "search_mailbox",
        {"mailbox": "finance", "criteria": {"query": "invoice", "source": source, "maxResults": 5}},
    )
    check(not result.is_error, f"{source}: {result.content}")
    return result.structured_content


async def main(mailgate: str) -> None:
    params = StdioServerParameters(command=mailgate, args=["serve"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            criteria = tools["search_mailbox"].input_schema["properties"]["criteria"]
            enum = criteria["properties"]["source"]["enum"]
            check(enum == ["live", "index", "hybrid"], f"source enum: {enum}")
            print("ok the schema offers source live|index|hybrid")

            indexed = await search(session, "index")
            check(indexed["strategy"] == "index", f"strategy: {indexed['strategy']}")
            check("indexedThrough" in indexed, "indexedThrough is missing")
            sources = {m["source"] for m in indexed["messages"]}
            check(indexed["messages"] and sources == {"index"}, f"index sources: {sources}")
            print(f"ok source index: {len(indexed['messages'])} hits, indexedThrough {indexed['indexedThrough']}")

            hybrid = await search(session, "hybrid")
            check(hybrid["strategy"] == "hybrid", f"strategy: {hybrid['strategy']}")
            sources = {m["source"] for m in hybrid["messages"]}
            check(sources <= {"live", "index", "both"} and "both" in sources, f"hybrid sources: {sources}")
            ids = [m["id"] for m in hybrid["messages"]]
            check(len(ids) == len(set(ids)), "hybrid hits are deduplicated")
            print(f"ok source hybrid: {sorted(sources)}")

            live = await search(session, "live")
            check("indexedThrough" not in live, "a live answer carries no index fields")
            check(all("source" not in m for m in live["messages"]), "live hits carry no source")
            print("ok source live: the reference's answer")
    print("python sdk index client: all checks passed")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python python_sdk_index_client.py /path/to/mailgate")
    try:
        asyncio.run(main(os.path.abspath(sys.argv[1])))
    except AssertionError as failure:
        print(f"FAILED: {failure}")
        sys.exit(1)
