"""Keyboard-first: footer at 80x24, help, command palette, trace toggle and expansion, images."""

from __future__ import annotations

import pytest
from textual.command import CommandList, CommandPalette
from textual.widgets._footer import FooterKey

from tests.tui.helpers import IC, SY, ask, intent, make_app, ready, settle, wait_until
from tui import events
from tui.actions import ACTIONS
from tui.screens.help import HelpScreen
from tui.screens.resume import SessionsScreen

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def footer_keys(app) -> dict[str, FooterKey]:
    return {key.action: key for key in app.screen.query(FooterKey)}


async def test_every_action_is_in_the_footer_within_80_columns(tmp_path):
    app, _, _ = make_app(tmp_path, {IC: [intent()], SY: ["ok"]})
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        app.open_patient("abc-123")  # shows "close patient" too
        await settle(pilot)
        keys = footer_keys(app)
        # cancel shows only during a turn, retry only while a clinical data service is down, lock
        # only with a clinician signed in
        idle = {a.action for a in ACTIONS if a.footer} - {"cancel_turn", "retry_tools", "lock"}
        assert {k.split(".")[-1] for k in keys} >= idle
        assert all(key.region.right <= 80 and key.region.width > 0 for key in keys.values())
        app.on_server_health(events.ServerHealth({"ehr": False}))  # now retry shows too
        await pilot.pause()
        keys = footer_keys(app)
        assert {k.split(".")[-1] for k in keys} >= idle | {"retry_tools"}
        assert all(key.region.right <= 80 and key.region.width > 0 for key in keys.values())
        app.clinician = "aokafor"  # signed in: F12 (lock) shows too, and everything still fits
        app.refresh_bindings()
        await settle(pilot)
        keys = footer_keys(app)
        assert {k.split(".")[-1] for k in keys} >= idle | {"retry_tools", "lock", "prescreen"}
        assert all(key.region.right <= 80 and key.region.width > 0 for key in keys.values())


async def test_help_screen_lists_every_key(tmp_path):
    app, _, _ = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        help_text = str(app.screen.query_one("#help-keys").render())
        assert all(a.description in help_text for a in ACTIONS)
        assert "Ctrl+N" in help_text and "F1" in help_text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_command_palette_runs_actions(tmp_path):
    app, _, _ = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"Resume a saved")
        await wait_until(pilot, lambda: app.screen.query_one(CommandList).option_count > 0, what="palette hits")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen), what="the session list")


async def test_trace_toggles_and_expands(tmp_path):
    app, _, _ = make_app(tmp_path, {IC: [intent()], SY: ["Answer."]})
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await ask(pilot, "What is hypertension?")
        await settle(pilot)
        trace = app.main.trace
        turn = trace.root.children[0]
        intent_node = turn.children[1]
        assert str(intent_node.label).startswith("Understanding the question") and "answered directly" in str(intent_node.label)
        assert not intent_node.is_expanded
        trace.focus()
        trace.move_cursor(intent_node)
        await pilot.press("space")
        assert intent_node.is_expanded
        assert any('"intent": "DIRECT"' in str(leaf.label) for leaf in intent_node.children)
        await pilot.press("ctrl+t")
        assert not trace.display
        await pilot.press("ctrl+t")
        assert trace.display


async def test_image_without_a_vision_projector_gives_a_clear_notice(tmp_path):
    image = tmp_path / "xray.png"
    image.write_bytes(PNG)
    seen = []
    app, _, _ = make_app(tmp_path, {IC: [intent()], SY: ["No image findings are available."]})
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        original = app.agent.run_turn
        app.agent.run_turn = lambda q, **kw: (seen.append(kw), original(q, **kw))[1]
        await pilot.press("ctrl+g")
        await pilot.press(*str(tmp_path / "missing.png"), "enter")
        assert "no file" in str(app.screen.query_one("#attach-error").render()).lower()
        app.screen.query_one("#attach-path").value = str(image)
        await pilot.press("enter")
        await pilot.pause()
        assert "image analysis unavailable on this model" in str(app.main.attachment.render())
        assert any("unavailable on this model" in text for _, text in app.notices)
        await ask(pilot, "What does this X-ray show?")
        await settle(pilot)
        assert seen[-1]["image_path"] == str(image)
        assembly = app.main.trace.events(1)[0]
        assert assembly.output["has_image"] is True
        assert not app.main.attachment.display  # the image went with that question only


@pytest.mark.parametrize("where", ["trace", "chat", "patient", "after-help"])
async def test_typing_reaches_the_question_box_wherever_the_focus_is(tmp_path, where):
    app, _, _ = make_app(tmp_path, {IC: [intent()], SY: ["ok"]})
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        if where == "after-help":
            await pilot.press("f1")
            await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
            await pilot.press("escape")
            await pilot.pause()
            app.main.chat.focus()  # as a click in the conversation leaves it
        else:
            getattr(app.main, where).focus()
        await pilot.pause()
        assert not app.main.prompt.has_focus
        await pilot.press(*"Is it safe?")
        assert app.main.prompt.value == "Is it safe?" and app.main.prompt.has_focus
