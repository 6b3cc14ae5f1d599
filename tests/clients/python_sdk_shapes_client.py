"""The official Python MCP SDK (`mcp` on PyPI) holding mailgate to issue 36's broken-MIME-shape
rules: for every shape of tests/fixtures/mime-shapes/shapes.json, the message alone in folder
`ShapeNN` of mailbox `shapes` (built by tests/it/real_clients.rs from the same corpus) is read and
searched as the manifest says.

Usage: python python_sdk_shapes_client.py /path/to/mailgate [/path/to/shapes.json]
The environment points `mailgate serve` at that config (OUTLOOK_PLUGIN_CONFIG). Per shape:
  * list_messages in its folder gives exactly one message;
  * get_message on it: every `bodyContains` string is in `message.body` of the structured content
    and in the text block (what a text-only client shows the model); the attachments' content
    types are the manifest's `attachments`, where it names them;
  * search_mailbox in its folder for `present`: FOUND, one hit, that message;
  * search_mailbox in its folder for `absent`: status `absentStatus`, and `absentWarning` among
    the warnings when the manifest gives one.
Every check runs; prints "python sdk shapes client: all checks passed", or exits 1 with the table
of every disagreement.
"""

import asyncio
import json
import os
import sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from mailgate_checks import check, text_of

MAILBOX = "shapes"
DEFAULT_MANIFEST = Path(__file__).resolve().parent.parent / "fixtures/mime-shapes/shapes.json"


class Table:
    """Every check made; `finish` fails with all the disagreements at once."""

    def __init__(self) -> None:
        self.checked = 0
        self.failed: list[tuple[str, str, str, str]] = []

    def record(self, shape: dict, what: str, ok: bool, expected: str, got: str) -> None:
        self.checked += 1
        if not ok:
            self.failed.append((shape["file"].removesuffix(".eml"), what, expected, got))

    def finish(self, shapes: list) -> None:
        if not self.failed:
            return
        titles = ("shape", "check", "expected", "got")
        widths = [max(len(t), *(len(row[i]) for row in self.failed)) for i, t in enumerate(titles)]
        line = lambda cells: " | ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
        lines = [f"{len(self.failed)} of {self.checked} checks disagree", line(titles)]
        lines += [line(row) for row in self.failed]
        described = {s["file"].removesuffix(".eml"): s["shape"] for s in shapes}
        lines.append("shapes that disagree:")
        for label in dict.fromkeys(row[0] for row in self.failed):
            lines.append(f"  {label}: {described.get(label, '?')}")
        raise AssertionError("\n".join(lines))


async def call(session: ClientSession, tool: str, args: dict):
    """(structured content, text block) of a successful call, or (None, why) of a tool error."""
    result = await session.call_tool(tool, args)
    if result.is_error:
        return None, f"tool error: {text_of(result)[:200]}"
    if result.structured_content is None:
        return None, "no structured content"
    return result.structured_content, text_of(result)


def warnings(answer: dict) -> list:
    return [w if isinstance(w, str) else json.dumps(w) for w in answer.get("warnings", [])]


def describe(answer, why: str) -> str:
    """`STATUS [warnings] n=hits` of a search answer."""
    if answer is None:
        return why
    return f"{answer.get('status')} [{','.join(warnings(answer))}] n={len(answer.get('messages', []))}"


def schema_checks(tools: dict) -> None:
    """The argument names this client sends are the ones the tool schemas declare."""
    props = lambda name: tools[name].input_schema["properties"]
    check({"mailbox", "messageId"} <= set(props("get_message")), f"get_message: {props('get_message')}")
    check("mailbox" in props("list_folders"), f"list_folders: {props('list_folders')}")
    for name in ("search_mailbox", "list_messages"):
        criteria = props(name)["criteria"]["properties"]
        check({"query", "folder", "maxResults"} <= set(criteria), f"{name} criteria: {sorted(criteria)}")
    print("ok the schemas declare mailbox, messageId, criteria.query|folder|maxResults")


async def folder_ids(session: ClientSession) -> dict:
    """displayName -> id of every folder of the mailbox, across pages."""
    ids, cursor = {}, None
    while True:
        args = {"mailbox": MAILBOX} | ({"cursor": cursor} if cursor else {})
        listing, why = await call(session, "list_folders", args)
        check(listing is not None, f"list_folders: {why}")
        ids |= {f["displayName"]: f["id"] for f in listing["folders"]}
        cursor = listing.get("nextCursor")
        if not cursor:
            return ids


async def shape_checks(session: ClientSession, table: Table, shape: dict, folder: str) -> None:
    listing, why = await call(
        session, "list_messages", {"mailbox": MAILBOX, "criteria": {"folder": folder, "maxResults": 5}}
    )
    ids = [m["id"] for m in listing["messages"]] if listing else []
    table.record(shape, "list_messages", len(ids) == 1, "one message", why if listing is None else f"n={len(ids)}")
    if not ids:
        return
    message_id = ids[0]

    answer, text = await call(session, "get_message", {"mailbox": MAILBOX, "messageId": message_id})
    if answer is None:
        table.record(shape, "get_message", False, "an answer", text)
    else:
        message = answer["message"]
        body = message.get("body") or ""
        for want in shape["bodyContains"]:
            table.record(shape, f"body has {want}", want in body, "contains it", repr(body[:160]))
            table.record(shape, f"text block has {want}", want in text, "contains it", f"{len(text)} chars without it")
        if shape["attachments"] is not None:
            got = [a.get("contentType", "?") for a in message.get("attachments", [])]
            table.record(shape, "attachments", got == shape["attachments"], str(shape["attachments"]), str(got))

    def search(query: str) -> dict:
        return {"mailbox": MAILBOX, "criteria": {"query": query, "folder": folder, "maxResults": 10}}

    present, why = await call(session, "search_mailbox", search(shape["present"]))
    ok = (
        present is not None
        and present["status"] == "FOUND"
        and [m["id"] for m in present["messages"]] == [message_id]
    )
    table.record(shape, f"search {shape['present']}", ok, "FOUND n=1 (the message)", describe(present, why))

    absent, why = await call(session, "search_mailbox", search(shape["absent"]))
    warning = shape["absentWarning"]
    ok = (
        absent is not None
        and absent["status"] == shape["absentStatus"]
        and (warning is None or warning in warnings(absent))
    )
    expected = f"{shape['absentStatus']} [{warning}]" if warning else shape["absentStatus"]
    table.record(shape, f"search {shape['absent']}", ok, expected, describe(absent, why))


async def main(mailgate: str, manifest: Path) -> None:
    shapes = json.loads(manifest.read_text(encoding="utf-8"))["shapes"]
    check(len(shapes) >= 20, f"the manifest lost shapes: {len(shapes)}")
    params = StdioServerParameters(command=mailgate, args=["serve"], env=dict(os.environ))
    table = Table()
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            schema_checks({t.name: t for t in (await session.list_tools()).tools})
            by_name = await folder_ids(session)
            for shape in shapes:
                folder = by_name.get(f"Shape{shape['file'][:2]}")
                table.record(shape, "folder", folder is not None, "its folder ShapeNN", "missing")
                if folder is not None:
                    await shape_checks(session, table, shape, folder)
    table.finish(shapes)
    print(f"ok {len(shapes)} shapes, {table.checked} checks")
    print("python sdk shapes client: all checks passed")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python python_sdk_shapes_client.py /path/to/mailgate [/path/to/shapes.json]")
    manifest = Path(sys.argv[2]) if len(sys.argv) == 3 else DEFAULT_MANIFEST
    try:
        asyncio.run(main(os.path.abspath(sys.argv[1]), manifest))
    except AssertionError as failure:
        print(f"FAILED: {failure}")
        sys.exit(1)
