"""The write approval dialog: the change to the record in clinical words, the patient (name,
age, allergies; fixed, not editable), the author, the safety findings of a prescription, and
the exact arguments, editable, with Approve or Reject and an optional reason.

Invariants:
- Approve returns only arguments that validate against the tool's contract
  (``mcp_servers.contracts.ARG_SCHEMAS``); invalid edits keep the dialog open with a message.
- Approving a prescription whose safety report needs an override asks for a reason of real
  words and the clinician's password again (``appliance.safety.policy``); without them the
  dialog stays open and says what is missing.
- Reject and Escape return a rejection carrying the original arguments and the typed reason
  (None when none was typed, so no reason is invented); nothing else leaves this dialog, so
  there is no path to a write without Approve.
- The dialog opens with the first argument focused, and Enter in a field does nothing, so
  only Ctrl+Y or pressing the Approve button itself approves.
"""

from __future__ import annotations

import typing

from pydantic import ValidationError
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Input, Label, Static, TextArea

from appliance.medication.orders import parse_order
from appliance.medication.sig import sig_summary
from appliance.safety.policy import OverridePolicy
from appliance.tools.base import Approval
from appliance.wording import action_words
from mcp_servers.contracts import ARG_SCHEMAS, TOOL_LABELS
from tui.approval import ApprovalContext
from tui.chart_words import allergy_text
from tui.widgets.trace_panel import arg_word

LONG_TEXT_FIELDS = {"note_text"}
FIXED_ROWS = 6  # the dialog's border (2), the buttons with their margin (2), the footer (1), a spare row
FIXED_FIELDS = {"patient_id"}  # the patient is the one shown; changing it means a new request


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

    def __init__(self, tool: str, args: dict, context: ApprovalContext | None = None) -> None:
        super().__init__()
        self.tool = tool
        self.original = dict(args)
        self.schema = ARG_SCHEMAS[tool]
        self.context = context
        self.policy = OverridePolicy.from_settings()

    def _patient_block(self) -> Text:
        ctx = self.context
        pid = self.original.get("patient_id")
        text = Text("Patient: ", style="bold")
        text.append(f"{ctx.patient} ({pid})" if ctx and ctx.patient != str(pid) else str(pid))
        if ctx is not None and ctx.not_open:
            text.append("  NOT the open patient", style="bold red")
        text.append("\n")
        if ctx is None or ctx.allergy_status == "unknown":
            text.append("Allergies: unknown (the chart could not be read)", style="bold yellow")
        else:
            text.append_text(allergy_text(ctx.allergy_status, ctx.allergies))
        text.append("\nAuthor: ", style="bold")
        text.append(ctx.author if ctx else "unknown")
        return text

    @property
    def is_override(self) -> bool:
        """Approving this write is an override (``appliance.safety.policy``)."""
        return bool(self.context and self.context.needs_override)

    def _reason_hint(self) -> str:
        """Approving past a HIGH or unchecked finding is an override: its reason is kept with the write."""
        if self.is_override:
            return f"why approve it anyway (at least {self.policy.min_reason_words} words), or reject"
        return "optional, recorded with a rejection"

    def _headline(self) -> Text | None:
        """The dialog's first lines: every HIGH finding, then what the safety check did not
        check; None when there is neither."""
        ctx = self.context
        high = [line for line in (ctx.findings or []) if line.startswith("HIGH ")] if ctx else []
        unchecked = [t for t in (ctx.not_checked if ctx else []) if not any(t in line for line in high)]
        if not high and not unchecked:
            return None
        text = Text()
        for line in high:
            text.append(f"{line}\n", style="bold red")
        if unchecked:
            text.append("Not checked: " + "; ".join(unchecked), style="bold yellow")
        text.rstrip()
        return text

    @property
    def _gated(self) -> bool:
        """A write that makes an order active: the safety gate checked it."""
        return self.tool in ("prescribe_medication", "change_medication_order") or (
            self.tool == "update_medication_status" and self.original.get("action") in ("resume", "renew"))

    def _read_as(self) -> str | None:
        """An order's sig as code reads it from the fields shown (as needed, maximum, duration...)."""
        if self.tool not in ("prescribe_medication", "change_medication_order"):
            return None
        text = " ".join(str(self.original[k]) for k in ("dosage", "frequency", "notes") if self.original.get(k))
        return sig_summary(parse_order(text, None))

    def _findings_block(self) -> Text:
        findings = self.context.findings if self.context else None
        text = Text("Safety checks: ", style="bold")
        if findings is None:
            text.append("none ran for this prescription: check allergies, interactions and duplicates yourself.",
                        style="bold yellow")
        elif not findings:
            text.append("no findings.")
        else:
            for line in findings:
                text.append(f"\n  • {line}", style="bold red")
        return text

    def compose(self) -> ComposeResult:
        with Vertical(id="approval-dialog") as dialog:
            dialog.border_title = f"Approve a change to the record: {TOOL_LABELS[self.tool]}"
            with VerticalScroll(id="approval-body"):
                headline = self._headline() if self._gated else None
                if headline is not None:
                    yield Static(headline, id="approval-headline")
                yield Static(Text(action_words(self.tool, self.original), style="bold"), id="approval-action")
                yield Static(self._patient_block(), id="approval-patient")
                if self._gated:
                    yield Static(self._findings_block(), id="approval-findings")
                read = self._read_as()
                if read:
                    yield Static(Text(f"Read as: {read}"), id="approval-sig")
                yield Static("Check the change, edit any field, then approve (Ctrl+Y) or reject (Ctrl+R / Escape).",
                             markup=False, id="approval-intro")
                for name, info in self.schema.model_fields.items():
                    if name in FIXED_FIELDS:
                        continue
                    nullable, allowed = field_hint(info.annotation)
                    hint = "one of " + ", ".join(allowed) if allowed else ""
                    if nullable:
                        hint = f"{hint}, or empty for none" if hint else "optional: leave empty for none"
                    value = self.original.get(name)
                    with Horizontal(classes="approval-field"):
                        yield Label(arg_word(name), classes="approval-label")
                        if name in LONG_TEXT_FIELDS:
                            yield TextArea("" if value is None else str(value), id=f"arg-{name}", soft_wrap=True)
                        else:
                            # no select-on-focus: a stray key appends visibly instead of replacing
                            yield Input("" if value is None else str(value), placeholder=hint.strip(),
                                        id=f"arg-{name}", compact=True, select_on_focus=False)
                yield Static("", id="approval-error", markup=False)
                with Horizontal(classes="approval-field"):
                    yield Label("reason", classes="approval-label")
                    yield Input(placeholder=self._reason_hint(), id="approval-reason", compact=True)
                if self.is_override and self.context.password_needed:
                    with Horizontal(classes="approval-field"):
                        yield Label("password", classes="approval-label")
                        yield Input(placeholder="your password again, to override", password=True,
                                    id="approval-password", compact=True)
            with Horizontal(id="approval-buttons"):  # outside the scrolling body: always on screen
                yield Button("Approve (Ctrl+Y)", id="approve", variant="success", compact=True)
                yield Button("Reject (Ctrl+R)", id="reject", variant="error", compact=True)
        yield Footer(compact=True, show_command_palette=False)

    def on_resize(self, event: events.Resize) -> None:
        """The body scrolls within what the terminal leaves after the border, the buttons and
        the footer, so Approve and Reject stay on screen at any size (80x24 included)."""
        self.query_one("#approval-body").styles.max_height = max(3, event.size.height - FIXED_ROWS)

    def on_mount(self) -> None:
        # The first argument, never Approve: a stray Enter must not approve a write.
        blink = getattr(self.app, "cursor_blink", True)  # off in tests and snapshots
        for field in self.query("Input, TextArea"):
            field.cursor_blink = blink
        self._focus_first_argument()

    def _focus_first_argument(self) -> None:
        """Focus the first argument; under load its field may not be mounted yet when the screen
        is (seen once in a whole-suite run): then after the next refresh, never a crash."""
        first = next(name for name in self.schema.model_fields if name not in FIXED_FIELDS)
        matches = self.query(f"#arg-{first}")
        if matches:
            matches.first().focus()
        elif self.is_attached:
            self.call_after_refresh(self._focus_first_argument)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()  # Enter in a field neither approves nor moves towards Approve

    def edited_args(self) -> dict:
        args: dict = {}
        for name, info in self.schema.model_fields.items():
            if name in FIXED_FIELDS:
                args[name] = self.original.get(name)
                continue
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
            self._refuse("Not approved - fix the arguments: " + validation_message(exc))
            return
        password = None
        if self.is_override:
            problems = [self.policy.reason_problem(self.reason())]
            if self.context.password_needed:
                password = self.query_one("#approval-password", Input).value or None
                problems.append(None if password else "an override needs your password")
            problems = [p for p in problems if p]
            if problems:
                self._refuse("Not approved - " + "; ".join(problems))
                return
        self.dismiss(Approval(True, clean, self.reason(), password=password))

    def _refuse(self, text: str) -> None:
        """Say why Approve did nothing, scrolled into view (the findings may fill the screen)."""
        error = self.query_one("#approval-error", Static)
        error.update(text)
        self.call_after_refresh(error.scroll_visible, animate=False)
        self.app.bell()

    def action_reject(self) -> None:
        # only the clinician's own words: the reason reaches synthesis as "Reason given: ..."
        self.dismiss(Approval(False, dict(self.original), self.reason()))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "approve":
            self.action_approve()
        else:
            self.action_reject()


