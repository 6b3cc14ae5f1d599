"""The official Python MCP SDK (`mcp` on PyPI) against a delegated alias (issue 37): a mailbox
signed in with `mailgate auth login`, read over XOAUTH2 with the grant mailgate keeps.

Usage: python python_sdk_delegated_client.py /path/to/mailgate ALIAS PHASE SUBJECT
  PHASE signed-in: list_messages in ALIAS finds SUBJECT.
  PHASE revoked:   the grant was revoked at the provider: list_messages answers SEARCH_FAILED
                   with backend_sign_in_required (never NOT_FOUND), and get_folder_stats is a
                   tool error (isError) with the code AUTH_REQUIRED naming `mailgate auth login
                   ALIAS`.
The environment must let `mailgate serve` start on that configuration (set by
tests/it/auth_login.rs). Prints one line per check; exits 1 at the first failed check.
"""

import asyncio
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from mailgate_checks import check, text_of


async def main(mailgate: str, alias: str, phase: str, subject: str) -> None:
    params = StdioServerParameters(command=mailgate, args=["serve"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listing = await session.call_tool(
                "list_messages", {"mailbox": alias, "criteria": {}}
            )
            body = listing.structured_content or {}
            if phase == "signed-in":
                check(not listing.is_error, f"list_messages: {text_of(listing)}")
                subjects = [m.get("subject") for m in body.get("messages", [])]
                check(subject in subjects, f"list_messages: {subject!r} not in {subjects}")
                print(f"ok list_messages: {body.get('status')}, {len(subjects)} message(s)")
                return
            check(body.get("status") == "SEARCH_FAILED", f"list_messages: {body}")
            check(
                "backend_sign_in_required" in body.get("warnings", []),
                f"list_messages warnings: {body.get('warnings')}",
            )
            print("ok list_messages: SEARCH_FAILED, backend_sign_in_required")
            stats = await session.call_tool(
                "get_folder_stats", {"mailbox": alias, "folderId": "inbox"}
            )
            check(stats.is_error, f"get_folder_stats: not an error: {text_of(stats)}")
            meta = stats.meta or {}
            check(meta.get("mailgate/errorCode") == "AUTH_REQUIRED", f"get_folder_stats meta: {meta}")
            check(
                f"mailgate auth login {alias}" in text_of(stats),
                f"get_folder_stats text: {text_of(stats)}",
            )
            print("ok get_folder_stats: AUTH_REQUIRED naming the command")


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[3] not in ("signed-in", "revoked"):
        sys.exit("usage: python python_sdk_delegated_client.py MAILGATE ALIAS signed-in|revoked SUBJECT")
    try:
        asyncio.run(main(os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]))
    except AssertionError as failure:
        print(f"FAILED: {failure}")
        sys.exit(1)
    print("python sdk delegated client: all checks passed")
