"""The agent floor's shape (docs/design.md §3-§5): nodes do not import each other, one rule
decides what may be a patient ID in words and one tokeniser splits words, for the whole agent
package and the screen check above it (``appliance.screen_text``), and the reading modules live
in one package that few modules outside the agent import."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import appliance.agent as agent_package
from appliance import screen_text
from appliance.agent import fact_guard, grounding, settled_patient
from appliance.agent.nodes import synthesize
from appliance.agent.reading import patient_refs, request, words
from appliance.agent.state import Node, NodeResult

NODES_DIR = Path(agent_package.__file__).parent / "nodes"
AGENT_DIR = Path(agent_package.__file__).parent
ROOT = AGENT_DIR.parent.parent
# Modules outside the agent that read words with the agent's rules, and why: they import the
# reading package (appliance/agent/reading/) directly.
READING_OUTSIDE_AGENT = {
    "appliance.screen_text": "hides patient IDs on screen by the one ID rule",
    "appliance.conversation.patient_choice": "reads the answer to code's 'which one did you mean?'",
    "appliance.acceptance.nodes": "reads the entities of the states it builds by hand for its node measurements",
}
# One module per graph node; nodes/ also holds prompting.py, the prompt helpers nodes share.
NODE_MODULES = {"input_assembly", "intent_classify", "tool_select", "tool_execute", "result_classify", "router",
                "error_handler", "synthesize"}


def test_every_graph_node_has_its_module_and_only_helpers_sit_beside_them():
    assert len(NODE_MODULES) == len(Node)
    files = {p.stem for p in NODES_DIR.glob("*.py")} - {"__init__"}
    assert NODE_MODULES <= files and files - NODE_MODULES == {"prompting"}


def _imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}  # "from appliance.agent.nodes import router"
    return found


def test_no_node_imports_another_node():
    crossings = {
        name: sorted(m for m in _imported_modules(NODES_DIR / f"{name}.py")
                     if m.startswith("appliance.agent.nodes.") and m.split(".")[3] in NODE_MODULES - {name})
        for name in NODE_MODULES
    }
    assert {name: found for name, found in crossings.items() if found} == {}


def _agent_modules():
    """Every module of the agent package, and the screen check that reads words beside it."""
    for info in pkgutil.walk_packages(agent_package.__path__, "appliance.agent."):
        yield importlib.import_module(info.name)
    yield screen_text


def _patterns():
    for module in _agent_modules():
        for attr, value in vars(module).items():
            if isinstance(value, re.Pattern):
                yield module.__name__, attr, value


# Patterns that find ID-shaped words for another job, with the job.
NOT_ID_RULES = {
    ("appliance.agent.fact_guard", "_NOT_VALUES"):
        "blanks dates and every hyphenated code with digits ('COVID-19', 'NCT-DEMO-1') before reading measured "
        "values; it decides no patient ID",
}


def test_one_rule_decides_a_word_that_may_be_a_patient_id():
    rule = {id(patient_refs.RECORD_SHAPE_RE), id(patient_refs.ID_WORD_RE), id(patient_refs.UUID_RE),
            id(patient_refs.MRN_RE)}
    finders = set()
    for module, attr, pattern in _patterns():
        found = {m.group(0) for m in pattern.finditer("for pat-7 and abc-123")}
        if found & {"pat-7", "abc-123"} and id(pattern) not in rule and (module, attr) not in NOT_ID_RULES:
            finders.add(f"{module}.{attr}")
    assert finders == set()
    # The agent's ID questions are answered by that rule's functions, not by copies.
    assert settled_patient.short_ids is patient_refs.short_ids
    assert request.typed_ids is patient_refs.typed_ids and request.find_patient_ids is patient_refs.find_patient_ids
    assert fact_guard.find_patient_ids is patient_refs.find_patient_ids and fact_guard.id_words is patient_refs.id_words
    assert screen_text.find_patient_ids is patient_refs.find_patient_ids and screen_text.id_words is patient_refs.id_words


def test_the_id_rule_reads_ids_and_the_short_shapes_apart():
    text = "chart for pat-7, then abc-123 and COVID-19 notes"
    assert patient_refs.find_patient_ids(text) == ("abc-123",)
    assert patient_refs.short_ids(text) == ("pat-7", "COVID-19")
    assert {"pat-7", "abc-123"} <= patient_refs.typed_ids(text)


def test_one_tokeniser_splits_words_for_the_whole_agent():
    tokenisers = set()
    for module, attr, pattern in _patterns():
        pieces = [t for t in pattern.findall("Metformin 500mg twice daily") if isinstance(t, str) and t.strip()]
        if len(pieces) >= 4 and pattern is not patient_refs.ID_WORD_RE:
            tokenisers.add(f"{module}.{attr}")
    assert tokenisers == {"appliance.agent.reading.words._WORD_RE", "appliance.agent.reading.words._NAME_WORD_RE"}
    # Grounding, the answer guard and the patient choice compare words with the same function.
    assert grounding.words is synthesize.words is patient_refs.words is words.words
    assert words.words("Metformin 500mg, twice-daily") == ["metformin", "500", "mg", "twice", "daily"]


def test_no_agent_module_compiles_its_own_word_or_id_pattern_inline():
    # Inline patterns (re.findall(r"...", text)) escape the module-level check: the old ones are gone.
    old = (r"[A-Za-z0-9][A-Za-z0-9.\-]*", r"[a-z0-9]+(?:[.'-][a-z0-9]+)*", r"[A-Za-z]{2,10}-\d{1,2}",
           r"[A-Za-z][A-Za-z\-]{3,}", r"[A-Za-z][A-Za-z\-]+")
    files = [*AGENT_DIR.rglob("*.py"), Path(screen_text.__file__)]
    hits = {f"{p.relative_to(ROOT)}: {o}" for p in files for o in old if o in p.read_text()}
    assert hits == set()


def test_the_reading_modules_live_in_one_package_that_few_outside_the_agent_import():
    # No module at an old path re-exports them.
    moved = {"dictation", "write_requests", "task_patterns", "patient_refs", "chart_topics", "words", "orders", "request"}
    assert {p.stem for p in AGENT_DIR.glob("*.py")} & moved == set()
    importers = set()
    for path in [*ROOT.joinpath("appliance").rglob("*.py"), *ROOT.joinpath("tui").rglob("*.py")]:
        if AGENT_DIR in path.parents:
            continue
        if any(m.startswith("appliance.agent.reading") for m in _imported_modules(path)):
            importers.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    assert importers == set(READING_OUTSIDE_AGENT)


def test_no_agent_module_re_exports_a_reading_function():
    # Whoever needs a parse imports it from the reading package, not from a node or a helper.
    re_exported = {f"{module.__name__}.{name}" for module in _agent_modules()
                   if not module.__name__.startswith("appliance.agent.reading")
                   for name in getattr(module, "__all__", ())
                   if getattr(getattr(module, name), "__module__", "").startswith("appliance.agent.reading")}
    assert re_exported == set()


def test_every_node_returns_one_typed_result():
    import inspect

    for name in NODE_MODULES:
        run = importlib.import_module(f"appliance.agent.nodes.{name}").run
        assert inspect.signature(run).return_annotation in ("NodeResult", NodeResult), name


def test_a_node_result_names_its_parts():
    from tests.agent.helpers import state

    done = importlib.import_module("appliance.agent.nodes.router").run(state("Check FDA warnings for dofetilide"))
    assert isinstance(done, NodeResult) and not isinstance(done, tuple)
    assert done.next is Node.SYNTHESIZE and done.reason and done.update["router_decisions"][0].next is Node.SYNTHESIZE
