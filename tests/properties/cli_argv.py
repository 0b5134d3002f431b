"""Generated command lines for ``appliance.cli.main``: unknown options, junk patient IDs, junk
files for the import, backup and restore commands, bad ``--model`` and ``--script`` values.

What must hold for every command line (``check_run``): ``main`` returns (or argparse exits
with) 0, 1 or 2, nothing escapes as an exception, and stderr holds no traceback and no
internal path (a ``.py`` name, the project's folder, site-packages) beyond what the caller typed.
A command that would start the real model or an interactive session is never generated:
``ask`` always carries a junk ``--model`` or a junk ``--script``, and the first word is never
``session``, ``tui``, ``smoke`` or ``bench`` (nor missing).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import appliance.runtime
from appliance.cli import main
from appliance.setup.home import init_home
from appliance.tools.mcp_client import MCPToolBox
from common import locations
from common.locations import PROJECT_ROOT
from models.profiles import PROFILES

# Words that start something long-running or interactive (the real model, a session).
NEVER_FIRST = frozenset({"session", "tui", "smoke", "bench"})
_TOKEN_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30)
JUNK_ID = st.one_of(
    _TOKEN_TEXT, st.sampled_from(["abc-123", "no-such-1", " abc-123 ", "../..", "x" * 65, "a/b", "pat 5", "-1",
                                  "abc-123;DROP", "\u202eabc-123", "\t"]),
)
JUNK_MODEL = st.one_of(_TOKEN_TEXT, st.sampled_from(["gemma3", "medgemma", "../models/x.gguf", "GEMMA3-270M", ""]))
OPTIONS = st.sampled_from(["--json", "--replace", "--no-model", "--patient", "--model", "--script", "--help-me",
                           "-x", "--", "--approve-writes", "--override-safety", "--clinician", "-", "--patient="])
JUNK_WORDS = st.lists(st.one_of(OPTIONS, _TOKEN_TEXT, JUNK_ID), max_size=5)

# Files: raw bytes, any JSON, JSON in each importer's outer shape with junk inside, XML-ish text.
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TOKEN_TEXT,
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TOKEN_TEXT, inner, max_size=4),
                     max_leaves=10)
FILE_CONTENT = st.one_of(
    st.binary(max_size=300),
    _JSON.map(json.dumps),
    st.builds(lambda entry: json.dumps({"resourceType": "Bundle", "type": "collection", "entry": entry}),
              st.lists(st.one_of(_JSON, st.fixed_dictionaries({"resource": _JSON})), max_size=4)),
    st.builds(lambda entry: json.dumps({"resourceType": "Bundle", "type": "transaction", "entry": [
        {"resource": {"resourceType": "Patient", "id": entry[0], "name": entry[1], "birthDate": entry[2]}}]}),
        st.tuples(_JSON, _JSON, _JSON)),
    st.builds(lambda r: json.dumps({"results": r}), _JSON),
    st.builds(lambda s: json.dumps({"studies": s}), _JSON),
    st.builds(lambda t: f"<?xml version='1.0'?><PubmedArticleSet>{t}</PubmedArticleSet>", _TOKEN_TEXT),
    st.builds(lambda t: "|".join(t) + "\n", st.lists(_TOKEN_TEXT, max_size=20)),
    st.just(""),
)
# What a path argument is: a junk file, a folder (with junk RRF files), a missing path, odd names.
# (No NUL in a path: a real command line cannot hold one.)
PATH_KIND = st.sampled_from(["file", "file", "file", "dir", "missing", "long", "sqlite"])


class Files:
    """Makes the junk files and folders path arguments point at, under one folder."""

    def __init__(self, root: Path):
        self.root = root
        self.n = 0

    def make(self, kind: str, content: bytes | str) -> str:
        self.n += 1
        path = self.root / f"junk-{self.n}"
        data = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
        if kind == "missing":
            return str(path / "not-there.json")
        if kind == "long":
            return str(self.root / ("n" * 300))
        if kind == "dir":
            path.mkdir()
            (path / "MRCONSO.RRF").write_bytes(data)
            (path / "MRSTY.RRF").write_bytes(data)
            return str(path)
        if kind == "sqlite":  # looks like a database by its name and header, is not one
            path = path.with_suffix(".sqlite")
            path.write_bytes(b"SQLite format 3\x00" + data)
            return str(path)
        path.write_bytes(data)
        return str(path)


@st.composite
def command_lines(draw, files: Files) -> tuple[list[str], str]:
    """(argv, stdin text) for one run of ``appliance``."""
    def path() -> str:
        return files.make(draw(PATH_KIND), draw(FILE_CONTENT))

    shape = draw(st.sampled_from([
        "ask", "ask", "ehr import", "umls import", "knowledge import", "ehr backup", "ehr restore",
        "audit verify", "audit show", "user", "random", "random",
    ]))
    if shape == "ask":
        argv = ["ask", draw(_TOKEN_TEXT)]
        if draw(st.booleans()):
            argv += ["--patient", draw(JUNK_ID)]
        argv += draw(st.lists(st.sampled_from(["--json", "--approve-writes"]), max_size=2, unique=True))
        if draw(st.booleans()):
            argv += ["--clinician", draw(JUNK_ID)]
        if draw(st.booleans()):
            argv += ["--override-safety", draw(_TOKEN_TEXT)]
        # Last, so nothing before it can name a real model: a junk model, or a junk script.
        argv += ["--script", path()] if draw(st.booleans()) else ["--model", draw(JUNK_MODEL)]
        if "--script" in argv and draw(st.booleans()):
            argv += ["--model", draw(JUNK_MODEL)]
    elif shape == "ehr import":
        argv = ["ehr", "import", path()]
    elif shape == "umls import":
        argv = ["umls", "import", path()] + draw(st.lists(st.just("--replace"), max_size=1))
    elif shape == "knowledge import":
        kind = draw(st.sampled_from(["openfda", "pubmed", "ctgov", "fhir", "rrf"]))
        argv = ["knowledge", "import", kind, path()] + draw(st.lists(st.just("--replace"), max_size=1))
    elif shape == "ehr backup":
        argv = ["ehr", "backup", draw(st.one_of(st.just(path()), st.just(str(files.root / f"b-{files.n}.sqlite"))))]
    elif shape == "ehr restore":
        argv = ["ehr", "restore", path()]
    elif shape == "audit verify":
        argv = ["audit", "verify"] + draw(st.lists(st.just("--json"), max_size=1))
    elif shape == "audit show":
        argv = ["audit", "show", "--patient", draw(JUNK_ID)] + draw(st.lists(st.just("--json"), max_size=1))
    elif shape == "user":
        argv = ["user", draw(st.sampled_from(["list", "disable", "enable", "passwd", "add", "frobnicate"])),
                draw(JUNK_ID)]
    else:
        first = draw(st.one_of(st.sampled_from(["ask", "init", "ehr", "umls", "knowledge", "audit", "user",
                                                "-h", "--version", "help", "Ask"]), _TOKEN_TEXT))
        argv = [first]
        if first == "ask":  # never the real model: a junk one, last
            argv += draw(JUNK_WORDS) + ["--model", draw(JUNK_MODEL)]
        elif first == "init":
            argv += ["--no-model", *draw(st.lists(OPTIONS, max_size=2))]
        else:
            argv += draw(JUNK_WORDS)
    argv += draw(st.lists(OPTIONS | _TOKEN_TEXT, max_size=2)) if shape != "ask" and draw(st.integers(0, 3)) == 0 else []
    if argv[0] in NEVER_FIRST or not argv[0]:
        argv[0] = "help"  # argparse refuses it: the run still counts
    if argv[0] == "ask" and "--model" not in argv and "--script" not in argv:
        argv += ["--model", "no-such-model"]
    stdin = draw(st.one_of(st.just(""), _TOKEN_TEXT, st.just("correct horse battery staple\n")))
    return argv, stdin


def refuse_real_models(load_model):
    """A guard, not a stand-in: ``load_model`` for a junk profile (it refuses it), a test failure
    for a real one (a generated command line must never load the model)."""
    def guarded(settings):
        if settings.model in PROFILES:
            raise AssertionError(f"a generated command line loaded the model {settings.model!r}")
        return load_model(settings)

    return guarded


def run_cli(argv: list[str], stdin: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of one ``main(argv)``; argparse's SystemExit gives the code."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        sys.stdin = saved
    return code, out.getvalue(), err.getvalue()


INTERNALS = (".py", "Traceback", str(PROJECT_ROOT), "site-packages")


def check_run(argv: list[str], code: int, out: str, err: str) -> None:
    assert code in (0, 1, 2), f"{argv!r}: exit code {code!r}; stderr {err[-500:]!r}"
    rest = err
    for word in sorted(set(argv), key=len, reverse=True):
        if word:
            rest = rest.replace(word, "")
    for internal in INTERNALS:
        assert internal not in rest, f"{argv!r}: stderr shows {internal!r}: {err[-800:]!r}"
    if code == 2:
        assert err.strip(), f"{argv!r}: exit 2 without a message"


def _in_process_client(self, server: str):
    from fastmcp import Client

    return Client(importlib.import_module(f"mcp_servers.{server}.server").mcp, timeout=30)


@contextlib.contextmanager
def cli_on_a_fresh_home(tmp_path: Path, monkeypatch) -> Iterator[Files]:
    """``appliance init`` (no model) into $APPLIANCE_HOME (already a fresh folder), the servers in
    this process on its databases, the real model refused; yields the junk-file maker."""
    init_home(progress=lambda message: None, with_model=False)
    dbs = {"ehr": locations.ehr_db_path, "umls": locations.umls_db_path, "knowledge": locations.knowledge_db_path}
    for server, path in dbs.items():
        importlib.import_module(f"mcp_servers.{server}.server").configure(path())
    monkeypatch.setattr(MCPToolBox, "_make_client", _in_process_client)
    monkeypatch.setattr(appliance.runtime, "load_model", refuse_real_models(appliance.runtime.load_model))
    junk = tmp_path / "junk"
    junk.mkdir()
    try:
        yield Files(junk)
    finally:
        for server in dbs:
            importlib.import_module(f"mcp_servers.{server}.server").configure(None)


def generated_runs(files: Files, runs: int) -> Counter:
    """``runs`` generated command lines, each checked (``check_run``); the exit codes counted."""
    codes: Counter = Counter()

    @settings(max_examples=runs, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(command_lines(files))
    def one_run(case):
        argv, stdin = case
        code, out, err = run_cli(argv, stdin)
        codes[code] += 1
        check_run(argv, code, out, err)

    one_run()
    return codes
