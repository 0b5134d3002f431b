"""``appliance terminal add|list|revoke|open-loopback``: bearer tokens for terminals that reach
the MCP servers over HTTP (``mcp_servers.access``; a clinic sharing one host).

Invariants:
- A token is printed once, by ``add``, and never stored: the tokens file keeps a one-way check
  of it (``mcp_servers.access.token_check``) that no server accepts as a key.
- Adding the first token closes a running loopback host to anyone without one; revoking a
  terminal refuses it at the record and the model server from its next request. Revoking the
  last one (or deleting the tokens file) leaves the host closed: only ``open-loopback``, refused
  while a token exists, lets a loopback host answer without tokens again, recorded with who and
  when in the host's issue record.
- A terminal's account must be an enabled clinician account (its writes are recorded in that
  name); with no account at all the command says to add one first.
- Failures are ``ApplianceError``s, which ``appliance.cli`` prints as one line with exit code 2.
"""

from __future__ import annotations

import json

from appliance.cli import options
from appliance.cli.options import Tree
from appliance.config import Settings
from appliance.errors import ApplianceError


def _checked_account(name: str) -> str:
    """The enabled clinician account ``name`` as the store spells it."""
    from appliance.accounts import AccountStore

    store = AccountStore.from_settings(Settings())
    if not store.exists():
        raise ApplianceError(f"no clinician account {name!r}: a terminal writes as one; add it first "
                             f"(`appliance user add {name}`)")
    account = store.get(name)
    if account is None or not account.enabled:
        raise ApplianceError(f"no enabled clinician account {name!r}: `appliance user list` shows them")
    return account.name


def cmd_add(args) -> int:
    from mcp_servers.access import AccessError, add_terminal

    account = _checked_account(args.account)
    try:
        token = add_terminal(args.name, account)
    except (AccessError, OSError) as exc:
        raise ApplianceError(_one_line(exc)) from None
    if args.json:
        print(json.dumps({"terminal": args.name, "account": account, "token": token}))
    else:
        print(f"terminal {args.name} added for {account}. Its token (shown once; set it as "
              f"APPLIANCE_MCP_TOKEN on that terminal):\n{token}")
    return 0


def cmd_list(args) -> int:
    from mcp_servers.access import AccessError, closed_without_tokens, read_terminals

    try:
        terminals = read_terminals()
        closed = closed_without_tokens()
    except AccessError as exc:
        raise ApplianceError(str(exc)) from None
    if args.json:
        print(json.dumps([{"terminal": t.name, "account": t.account, "created": t.created} for t in terminals], indent=2))
        return 0
    if not terminals and closed:
        print("no terminal tokens, and tokens were issued here: the servers refuse every HTTP request "
              "(`appliance terminal add NAME --account USER`, or `appliance terminal open-loopback`)")
    elif not terminals:
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


def cmd_open_loopback(args) -> int:
    from mcp_servers.access import AccessError, closed_without_tokens, open_loopback

    try:
        if not closed_without_tokens():
            raise ApplianceError("the host is not closed: no terminal token was issued since it was last open")
        entry = open_loopback()
    except (AccessError, OSError) as exc:
        raise ApplianceError(_one_line(exc)) from None
    if args.json:
        print(json.dumps({"loopback_open": True, "by": entry["by"], "at": entry["at"]}))
    else:
        print(f"loopback reopened by {entry['by']} at {entry['at']}: a server on 127.0.0.1 answers anyone on this "
              "machine without a token until the next `appliance terminal add`")
    return 0


def _one_line(exc: Exception) -> str:
    return str(exc) if not isinstance(exc, OSError) else f"the tokens file cannot be written ({exc.strerror})"


def register(tree: Tree) -> None:
    """``appliance terminal add|list|revoke|open-loopback``."""
    term = tree.group("terminal", "bearer tokens for terminals using the MCP servers over HTTP")
    add = term.command("add", "add a terminal and print its token (once)", cmd_add)
    add.add_argument("name", help="the terminal's name: letters, digits, '.', '_', '-'")
    add.add_argument("--account", required=True, help="the clinician account its writes are recorded under")
    options.json_output(add)
    options.json_output(term.command("list", "the terminals (never their tokens)", cmd_list))
    revoke = term.command("revoke", "refuse a terminal's token from now on", cmd_revoke)
    revoke.add_argument("name")
    options.json_output(revoke)
    options.json_output(term.command(
        "open-loopback", "after every token is revoked: let a loopback host answer without tokens again (recorded)",
        cmd_open_loopback))
