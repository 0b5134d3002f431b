"""The write approval dialog: the exact arguments of a prescribe_medication, add_allergy or
save_clinical_note call, editable, with Approve or Reject and an optional reason.

Invariants:
- Approve returns only arguments that validate against the tool's contract
  (``mcp_servers.contracts.ARG_SCHEMAS``); invalid edits keep the dialog open with a message.
- Reject and Escape return a rejection carrying the original arguments and the typed reason
  (None when none was typed, so no reason is invented); nothing else leaves this dialog, so
  there is no path to a write without Approve.
- The dialog opens with the first argument focused, and Enter in a field does nothing, so
  only Ctrl+Y or pressing the Approve button itself approves.
"""

from __future__ import annotations

import typing

from pydantic import ValidationError
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Input, Label, Static, TextArea

from appliance.tools.base import Approval
from mcp_servers.contracts import ARG_SCHEMAS, TOOL_LABELS

LONG_TEXT_FIELDS = {"note_text"}


def field_hint(annotation) -> tuple[bool, list[str]]:
    """(nullable, allowed values) of a contract field's type."""
    args = typing.get_args(annotation)
    nullable = type(None) in args
    allowed: list[str] = []
    for arg in (args or (annotation,)):
        if typing.get_origin(arg) is typing.Literal:
            allowed += [str(v) for v in typing.get_args(arg)]
    if typing.get_origin(annotation) is typing.Literal:
        allowed = [str(v) for v in typing.get_args(annotation)]
    return nullable, allowed


def validation_message(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


class ApprovalScreen(ModalScreen[Approval | None]):
    BINDINGS = [
        Binding("ctrl+y", "approve", "Approve", priority=True),
        Binding("ctrl+r", "reject", "Reject", priority=True),
        Binding("escape", "reject", "Reject"),
    ]

    def __init__(self, tool: str, args: dict) -> None:
        super().__init__()
        self.tool = tool
        self.original = dict(args)
        self.schema = ARG_SCHEMAS[tool]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="approval-dialog") as dialog:
            dialog.border_title = f"Approve a write to the record: {TOOL_LABELS[self.tool]}"
            yield Static(
                f"The assistant wants to run {self.tool} with exactly these arguments. "
                "Edit any field, then approve (Ctrl+Y) or reject (Ctrl+R / Escape).",
                markup=False, id="approval-intro",
            )
            for name, info in self.schema.model_fields.items():
                nullable, allowed = field_hint(info.annotation)
                hint = "one of " + ", ".join(allowed) if allowed else ""
                if nullable:
                    hint = f"{hint}, or empty for none" if hint else "optional: leave empty for none"
                value = self.original.get(name)
                with Horizontal(classes="approval-field"):
                    yield Label(name, classes="approval-label")
                    if name in LONG_TEXT_FIELDS:
                        yield TextArea("" if value is None else str(value), id=f"arg-{name}", soft_wrap=True)
                    else:
                        # no select-on-focus: a stray key appends visibly instead of replacing
                        yield Input("" if value is None else str(value), placeholder=hint.strip(),
                                    id=f"arg-{name}", compact=True, select_on_focus=False)
            yield Static("", id="approval-error", markup=False)
            with Horizontal(classes="approval-field"):
                yield Label("reason", classes="approval-label")
                yield Input(placeholder="optional, recorded with a rejection", id="approval-reason", compact=True)
            with Horizontal(id="approval-buttons"):
                yield Button("Approve (Ctrl+Y)", id="approve", variant="success", compact=True)
                yield Button("Reject (Ctrl+R)", id="reject", variant="error", compact=True)
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        # The first argument, never Approve: a stray Enter must not approve a write.
        blink = getattr(self.app, "cursor_blink", True)  # off in tests and snapshots
        for field in self.query("Input, TextArea"):
            field.cursor_blink = blink
        first = next(iter(self.schema.model_fields))
        self.query_one(f"#arg-{first}").focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()  # Enter in a field neither approves nor moves towards Approve

    def edited_args(self) -> dict:
        args: dict = {}
        for name, info in self.schema.model_fields.items():
            widget = self.query_one(f"#arg-{name}")
            raw = widget.text if isinstance(widget, TextArea) else widget.value
            nullable, _ = field_hint(info.annotation)
            args[name] = None if (nullable and raw.strip() == "") else raw.strip()
        return args

    def reason(self) -> str | None:
        return self.query_one("#approval-reason", Input).value.strip() or None

    def action_approve(self) -> None:
        args = self.edited_args()
        try:
            clean = self.schema.model_validate(args).model_dump()
        except ValidationError as exc:
            self.query_one("#approval-error", Static).update(
                "Not approved - fix the arguments: " + validation_message(exc))
            self.app.bell()
            return
        self.dismiss(Approval(True, clean, self.reason()))

    def action_reject(self) -> None:
        # only the clinician's own words: the reason reaches synthesis as "Reason given: ..."
        self.dismiss(Approval(False, dict(self.original), self.reason()))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "approve":
            self.action_approve()
        else:
            self.action_reject()


