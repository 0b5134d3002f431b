"""``appliance terminal add|list|revoke``: bearer tokens for terminals that reach the MCP servers
over HTTP (``mcp_servers.access``; a clinic sharing one host).

Invariants:
- A token is printed once, by ``add``, and never stored: the tokens file keeps a one-way check
  of it (``mcp_servers.access.token_check``) that no server accepts as a key.
- Adding the first token closes a running loopback host to anyone without one; revoking a
  terminal refuses it at the record and the model server from its next request.
- With clinician accounts, a terminal's account must be one of them and enabled (its writes are
  recorded in that name); without accounts any name the operator chooses is accepted.
- Failures are ``ApplianceError``s, which ``appliance.cli`` prints as one line with exit code 2.
"""

from __future__ import annotations

import json

from appliance.cli import options
from appliance.cli.options import Tree
from appliance.config import Settings
from appliance.errors import ApplianceError


def _checked_account(name: str) -> str:
    from appliance.accounts import AccountStore

    accounts = {a.name: a for a in AccountStore.from_settings(Settings()).list()}
    if accounts and (name not in accounts or not accounts[name].enabled):
        raise ApplianceError(f"no enabled clinician account {name!r}: `appliance user list` shows them")
    return name


def cmd_add(args) -> int:
    from mcp_servers.access import AccessError, add_terminal

    try:
        token = add_terminal(args.name, _checked_account(args.account))
    except AccessError as exc:
        raise ApplianceError(str(exc)) from None
    if args.json:
        print(json.dumps({"terminal": args.name, "account": args.account, "token": token}))
    else:
        print(f"terminal {args.name} added for {args.account}. Its token (shown once; set it as "
              f"APPLIANCE_MCP_TOKEN on that terminal):\n{token}")
    return 0


def cmd_list(args) -> int:
    from mcp_servers.access import AccessError, read_terminals

    try:
        terminals = read_terminals()
    except AccessError as exc:
        raise ApplianceError(str(exc)) from None
    if args.json:
        print(json.dumps([{"terminal": t.name, "account": t.account, "created": t.created} for t in terminals], indent=2))
        return 0
    if not terminals:
        print("no terminal tokens: the servers serve HTTP on loopback only (`appliance terminal add NAME --account USER`)")
    for t in terminals:
        print(f"{t.name}: writes as {t.account}; added {t.created}")
    return 0


def cmd_revoke(args) -> int:
    from mcp_servers.access import AccessError, revoke_terminal

    try:
        revoke_terminal(args.name)
    except AccessError as exc:
        raise ApplianceError(str(exc)) from None
    if args.json:
        print(json.dumps({"terminal": args.name, "revoked": True}))
    else:
        print(f"terminal {args.name} revoked: the record and the model server refuse its token from its next request")
    return 0


def register(tree: Tree) -> None:
    """``appliance terminal add|list|revoke``."""
    term = tree.group("terminal", "bearer tokens for terminals using the MCP servers over HTTP")
    add = term.command("add", "add a terminal and print its token (once)", cmd_add)
    add.add_argument("name", help="the terminal's name: letters, digits, '.', '_', '-'")
    add.add_argument("--account", required=True, help="the clinician account its writes are recorded under")
    options.json_output(add)
    options.json_output(term.command("list", "the terminals (never their tokens)", cmd_list))
    revoke = term.command("revoke", "refuse a terminal's token from now on", cmd_revoke)
    revoke.add_argument("name")
    options.json_output(revoke)
