"""``appliance user ...`` (passwords from standard input or a terminal, never argv) and the
clinician that ``ask --approve-writes`` needs: refused with one line and exit 2 before anything
is built, or signed in and carried by every approval."""

from __future__ import annotations

import io
import json

import pytest

from appliance.accounts import AccountStore, SignInRefused
from appliance.accounts.sign_in import line_sign_in
from appliance.cli import main

pytestmark = pytest.mark.timeout(60)
PASSWORD = "correct horse battery"


@pytest.fixture
def stdin(monkeypatch):
    def feed(text: str) -> None:
        monkeypatch.setattr("sys.stdin", io.StringIO(text))

    feed("")
    return feed


@pytest.fixture
def aokafor(appliance_home, stdin):
    stdin(PASSWORD + "\n")
    assert main(["user", "add", "aokafor", "--display-name", "Dr. Ada Okafor", "--role", "physician"]) == 0
    return appliance_home


@pytest.fixture
def nothing_built(monkeypatch):
    """Fails the test if the agent (model, servers) is built."""
    def refuse(*args, **kwargs):
        raise AssertionError("the agent was built")

    monkeypatch.setattr("appliance.runtime.build_agent", refuse)


def test_user_add_reads_the_password_from_stdin_and_lists_without_it(appliance_home, stdin, capsys):
    stdin(PASSWORD + "\n")
    assert main(["user", "add", "aokafor", "--display-name", "Dr. Ada Okafor", "--role", "physician"]) == 0
    assert capsys.readouterr().out == "account Dr. Ada Okafor (aokafor) added\n"
    assert main(["user", "list"]) == 0
    assert capsys.readouterr().out.strip() == "Dr. Ada Okafor (aokafor), physician: enabled; last sign-in never"
    assert main(["user", "list", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["name"] == "aokafor" and listed["enabled"] is True
    assert PASSWORD not in json.dumps(listed) and "hash" not in json.dumps(listed)
    assert AccountStore().verify("aokafor", PASSWORD).display_name == "Dr. Ada Okafor"


def test_user_add_on_a_terminal_asks_twice(appliance_home, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", type("Tty", (io.StringIO,), {"isatty": lambda self: True})())
    typed = iter([PASSWORD, "something else"])
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(typed))
    assert main(["user", "add", "aokafor"]) == 2
    assert "the two passwords differ; nothing was changed" in capsys.readouterr().err
    assert not AccountStore().exists()
    typed = iter([PASSWORD, PASSWORD])
    assert main(["user", "add", "aokafor"]) == 0
    assert AccountStore().verify("aokafor", PASSWORD)


def test_no_password_option_exists(appliance_home, capsys):
    with pytest.raises(SystemExit):
        main(["user", "add", "aokafor", "--password", PASSWORD])


@pytest.mark.parametrize("argv,text,words", [
    (["user", "add", "bob"], "short\n", "at least 8 characters"),
    (["user", "add", "bob"], "", "no password was given on standard input"),
    (["user", "add", "bad name"], PASSWORD + "\n", "account name"),
    (["user", "disable", "nobody"], "", "no account named 'nobody'"),
    (["user", "passwd", "nobody"], PASSWORD + "\n", "no account named 'nobody'"),
])
def test_user_command_errors_are_one_line_and_exit_2(appliance_home, stdin, capsys, argv, text, words):
    stdin(text)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_disable_enable_and_passwd(aokafor, stdin, capsys):
    assert main(["user", "disable", "aokafor"]) == 0
    assert main(["user", "list"]) == 0
    assert "DISABLED" in capsys.readouterr().out
    assert main(["user", "enable", "aokafor"]) == 0
    stdin("a new password\n")
    assert main(["user", "passwd", "aokafor"]) == 0
    assert "password of aokafor changed" in capsys.readouterr().out
    assert AccountStore().verify("aokafor", "a new password")


# -- ask --approve-writes ------------------------------------------------------------------
@pytest.mark.parametrize("argv,env,text,words", [
    ([], None, "", "--approve-writes needs a clinician: pass --clinician NAME"),
    (["--clinician", "aokafor"], None, "", "no password was given on standard input"),
    (["--clinician", "aokafor"], None, "wrong password\n", "Unknown clinician or wrong password"),
    (["--clinician", "someone"], None, PASSWORD + "\n", "Unknown clinician or wrong password"),
    ([], "someone", PASSWORD + "\n", "Unknown clinician or wrong password"),
])
def test_ask_approve_writes_refuses_without_a_signed_in_clinician(aokafor, stdin, monkeypatch, nothing_built,
                                                                  capsys, argv, env, text, words):
    capsys.readouterr()
    if env is None:
        monkeypatch.delenv("APPLIANCE_USER", raising=False)
    else:
        monkeypatch.setenv("APPLIANCE_USER", env)
    stdin(text)
    assert main(["ask", "Add a penicillin allergy for abc-123", "--approve-writes", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert PASSWORD not in err


def test_ask_approve_writes_refuses_a_disabled_account(aokafor, stdin, nothing_built, capsys):
    assert main(["user", "disable", "aokafor"]) == 0
    stdin(PASSWORD + "\n")
    assert main(["ask", "x", "--approve-writes", "--clinician", "aokafor"]) == 2
    assert "The account aokafor is disabled." in capsys.readouterr().err


def test_ask_approve_writes_with_no_accounts_at_all(appliance_home, stdin, nothing_built, capsys):
    stdin(PASSWORD + "\n")
    assert main(["ask", "x", "--approve-writes", "--clinician", "aokafor"]) == 2
    assert "this appliance has none: create one with `appliance user add aokafor`" in capsys.readouterr().err


def test_clinician_only_applies_with_approve_writes(aokafor, nothing_built, capsys):
    assert main(["ask", "x", "--clinician", "aokafor"]) == 2
    assert "--clinician only applies with --approve-writes" in capsys.readouterr().err


def test_ask_signs_in_then_builds_the_tool_box_in_the_clinicians_name(aokafor, stdin, monkeypatch, capsys):
    """The clinician reaches build_agent (the servers' APPLIANCE_USER) and every approval."""
    built = {}

    class Agent:
        model_notice = None

        def run_turn(self, question, patient_id=None):
            built["approval"] = built["approver"]("add_allergy", {"patient_id": "abc-123"}, safety=None)
            return type("Result", (), {"model_notice": None, "response": "done", "disclaimer": None, "safety": []})()

    class Tools:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    def build_agent(settings, script, approver, clinician=None):
        built.update(approver=approver, clinician=clinician)
        return Agent(), Tools()

    monkeypatch.setattr("appliance.runtime.build_agent", build_agent)
    monkeypatch.setenv("APPLIANCE_USER", "AOKAFOR")  # names the account, in any case
    stdin(PASSWORD + "\n")
    assert main(["ask", "Add a penicillin allergy for abc-123", "--approve-writes"]) == 0
    assert built["clinician"] == "aokafor"
    assert built["approval"].approved and built["approval"].clinician == "aokafor"
    assert AccountStore().get("aokafor").last_sign_in_at is not None


# -- the line session's sign-in ------------------------------------------------------------
class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def cheap_store(tmp_path):
    from argon2 import PasswordHasher

    store = AccountStore(tmp_path / "accounts.sqlite", max_failures=2,
                         hasher=PasswordHasher(time_cost=1, memory_cost=8, parallelism=1))
    store.add("aokafor", PASSWORD)
    return store


def test_line_sign_in_on_a_terminal_asks_up_to_three_times_with_hidden_passwords(cheap_store, monkeypatch, capsys):
    typed = iter(["wrong password", PASSWORD])
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(typed))
    assert line_sign_in(cheap_store, Terminal("aokafor\naokafor\n")).name == "aokafor"
    assert capsys.readouterr().out.count("Unknown clinician or wrong password.") == 1


def test_line_sign_in_on_a_terminal_stops_at_the_lock_out(cheap_store, monkeypatch, capsys):
    typed = iter(["wrong password", "wrong again", PASSWORD])
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(typed))
    with pytest.raises(SignInRefused, match="locked after 2 wrong passwords"):
        line_sign_in(cheap_store, Terminal("aokafor\naokafor\naokafor\n"))


def test_line_sign_in_from_a_script_gets_one_try(cheap_store):
    with pytest.raises(SignInRefused, match="the session needs a signed-in clinician: Unknown clinician"):
        line_sign_in(cheap_store, io.StringIO(f"aokafor\nwrong password\naokafor\n{PASSWORD}\n"))
    assert line_sign_in(cheap_store, io.StringIO(f"aokafor\n{PASSWORD}\nWhat next?\n")).name == "aokafor"
    with pytest.raises(SignInRefused, match="no clinician signed in"):
        line_sign_in(cheap_store, io.StringIO(""))


# -- password bytes that are not text ------------------------------------------------------
@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])  # strict UTF-8, and the C locale's surrogateescape
def test_a_password_that_is_not_utf8_is_one_clear_line_for_user_add_and_ask(tmp_path, locale):
    """The issue's case: `printf 'pass\\xff\\xfeword\\n' | appliance user add zz` (and the same on
    `ask --approve-writes`) gave a traceback."""
    import os
    import subprocess
    import sys

    from common.locations import PROJECT_ROOT

    env = {**os.environ, "APPLIANCE_HOME": str(tmp_path), "LC_ALL": locale, "PYTHONUTF8": "0",
           "FASTMCP_CHECK_FOR_UPDATES": "off"}

    def cli(*argv, stdin: bytes):
        return subprocess.run([sys.executable, "-m", "appliance.cli", *argv], cwd=PROJECT_ROOT, env=env,
                              input=stdin, capture_output=True, timeout=120)

    added = cli("user", "add", "zz", stdin=b"pass\xff\xfeword\n")
    err = added.stderr.decode("utf-8", "replace")
    assert added.returncode == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "not UTF-8 text" in err and not AccountStore(tmp_path / "accounts.sqlite").exists()
    assert cli("user", "add", "aokafor", stdin=PASSWORD.encode() + b"\n").returncode == 0
    asked = cli("ask", "Add a latex allergy for abc-123", "--approve-writes", "--clinician", "aokafor",
                stdin=b"pass\xff\xfeword\n")
    err = asked.stderr.decode("utf-8", "replace")
    assert asked.returncode == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "no write without a signed-in clinician: the password is not UTF-8 text" in err


def test_a_name_or_password_that_is_not_text_at_the_line_sessions_sign_in_is_one_line(cheap_store, capsys):
    for data in (b"aokafor\npass\xff\xfeword\n", b"aok\xffafor\n" + PASSWORD.encode() + b"\n"):
        # (a pipe is decoded a block at a time: the name's read meets the bad bytes too)
        stream = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
        with pytest.raises(SignInRefused, match="is not UTF-8 text"):
            line_sign_in(cheap_store, stream)
    typed = io.StringIO("aokafor\npass\udcff\udcfeword\n")  # the C locale's stdin: bytes escaped
    with pytest.raises(SignInRefused, match="the password is not UTF-8 text"):
        line_sign_in(cheap_store, typed)
    assert "Traceback" not in capsys.readouterr().out


def test_user_policy_sets_the_lock_out_in_the_data_home(appliance_home, capsys, monkeypatch):
    monkeypatch.setenv("APPLIANCE_SIGN_IN_MAX_FAILURES", "1000")  # not the policy
    assert main(["user", "policy", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_failures"] == 5
    assert main(["user", "policy", "--max-failures", "3", "--lockout-minutes", "30"]) == 0
    assert "locks for 30 minutes after 3 wrong passwords" in capsys.readouterr().out
    from appliance.config import Settings

    assert AccountStore.from_settings(Settings()).max_failures == 3
    assert main(["user", "policy", "--max-failures", "0"]) == 2
    assert "max_failures is a whole number from 1 to 100" in capsys.readouterr().err
