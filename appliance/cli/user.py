"""``appliance user add|list|disable|enable|passwd|policy``: the clinician accounts
(``appliance.accounts``) and the sign-in lock-out policy, kept in the data home.

Invariants:
- A password is never an argument: ``add`` and ``passwd`` read it from the terminal (typed
  twice, hidden) or as one line of standard input (``appliance.accounts.sign_in``).
- Whoever runs these commands can already read the data home, so they need no password; the
  accounts file is the operator's (mode 0600).
- Output names accounts, never passwords or hashes; failures are ``ApplianceError``s, which
  ``appliance.cli`` prints as one line with exit code 2.
"""

from __future__ import annotations

import json

from appliance.cli import options
from appliance.cli.options import Tree
from appliance.config import Settings


def _store():
    from appliance.accounts import AccountStore

    return AccountStore.from_settings(Settings())


def cmd_add(args) -> int:
    from appliance.accounts.sign_in import read_new_password

    account = _store().add(args.name, read_new_password(), display_name=args.display_name, role=args.role)
    _said(args, account, f"account {account.label} added")
    return 0


def cmd_list(args) -> int:
    accounts = _store().list()
    if args.json:
        print(json.dumps([a.to_json() for a in accounts], indent=2))
        return 0
    if not accounts:
        print("no clinician accounts (the terminal attributes writes to the operator); "
              "`appliance user add NAME` creates one")
        return 0
    for a in accounts:
        state = "enabled" if a.enabled else "DISABLED"
        if a.locked_until:
            state += f", locked until {a.locked_until}"
        extra = f", {a.role}" if a.role else ""
        print(f"{a.label}{extra}: {state}; last sign-in {a.last_sign_in_at or 'never'}")
    return 0


def cmd_enable(args) -> int:
    account = _store().set_enabled(args.name, args.enable)
    _said(args, account, f"account {account.name} {'enabled' if account.enabled else 'disabled'}")
    return 0


def cmd_passwd(args) -> int:
    from appliance.accounts.sign_in import read_new_password

    account = _store().set_password(args.name, read_new_password())
    _said(args, account, f"password of {account.name} changed (any lock-out lifted)")
    return 0


def _said(args, account, words: str) -> None:
    """What an account command did: its words, or (``--json``) the account as it now stands."""
    print(json.dumps(account.to_json(), indent=2) if args.json else words)


def cmd_policy(args) -> int:
    from appliance.accounts import SignInPolicy, policy_path, read_policy, write_policy

    policy = read_policy()
    if args.max_failures is not None or args.lockout_minutes is not None:
        policy = SignInPolicy(args.max_failures if args.max_failures is not None else policy.max_failures,
                              args.lockout_minutes if args.lockout_minutes is not None else policy.lockout_minutes)
        write_policy(policy)
    if args.json:
        print(json.dumps({"max_failures": policy.max_failures, "lockout_minutes": policy.lockout_minutes,
                          "file": str(policy_path())}))
    else:
        print(f"an account locks for {policy.lockout_minutes:g} minutes after {policy.max_failures} wrong passwords "
              f"in a row ({policy_path()})")
    return 0


def register(tree: Tree) -> None:
    """``appliance user add|list|disable|enable|passwd|policy``."""
    user = tree.group("user", "clinician accounts for sign-in (passwords from the terminal or stdin)")
    add = user.command("add", "add a clinician account (password typed twice, or one line of stdin)", cmd_add)
    add.add_argument("name", help="account name: letters, digits, '.', '_', '@', '-' (recorded on EHR writes)")
    add.add_argument("--display-name", help="the name shown in the terminal, e.g. 'Dr. Ada Okafor'")
    add.add_argument("--role", help="free text, e.g. physician or nurse (shown, not enforced)")
    options.json_output(add, "print the account as one JSON object")
    options.json_output(user.command("list", "list the accounts", cmd_list))
    for action, enable in (("disable", False), ("enable", True)):
        command = user.command(action, f"{action} an account (it is kept, with its history)", cmd_enable, enable=enable)
        command.add_argument("name")
        options.json_output(command, "print the account as one JSON object")
    passwd = user.command("passwd", "set a new password (also lifts a lock-out)", cmd_passwd)
    passwd.add_argument("name")
    options.json_output(passwd, "print the account as one JSON object")
    policy = user.command("policy", "show or set the lock-out: wrong passwords before an account locks, and for "
                                    "how long (kept in the data home)", cmd_policy)
    policy.add_argument("--max-failures", type=int, metavar="N", help="wrong passwords in a row (1-100; default 5)")
    policy.add_argument("--lockout-minutes", type=float, metavar="M", help="minutes locked (default 15)")
    options.json_output(policy)
