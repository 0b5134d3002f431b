"""The open patient's chart summary: allergies first, then active problems, medications,
recent labs, vitals and the most recent notes.

Invariants: allergies always come first, worded by ``tui.chart_words``: an empty list reads
"allergies not recorded", never "no allergies" (absence in the record is not absence in the
patient). Chart text is
shown as plain text, never parsed as markup. Unknown fields are tolerated: the summary is
built from whatever the record returned.
"""

from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from tui.chart_words import allergy_status

MAX_ITEMS = 8
MAX_NOTES = 3
NOTE_CHARS = 60


def _items(chart: dict, *keys: str) -> list:
    for key in keys:
        value = chart.get(key)
        if isinstance(value, list):
            return value
    return []


def _join(*parts) -> str:
    return " ".join(str(p) for p in parts if p not in (None, ""))


def _result_line(item: dict) -> str:
    line = _join(item.get("display") or item.get("name"), item.get("value"), item.get("unit"))
    if item.get("flag") and item.get("flag") not in ("N", "normal"):
        line += f" [{item['flag']}]"
    when = str(item.get("effective_at") or item.get("date") or "")[:10]
    return f"{line} ({when})" if when else line


def _note_line(note: dict) -> str:
    """Type, date, then the title and the start of the text; a title that only repeats the
    type ("Progress note") is left out."""
    title = str(note.get("title") or "")
    if title.lower() == f"{note.get('note_type')} note":
        title = ""
    about = " ".join(" — ".join(p for p in (title, str(note.get("text") or "")) if p).split())
    if len(about) > NOTE_CHARS:
        about = about[:NOTE_CHARS - 1].rstrip() + "…"
    when = str(note.get("created_at") or note.get("date") or "")[:10]
    return f"{_join(note.get('note_type'), when)}: {about}"


def _section(text: Text, title: str, lines: list[str], empty: str, style: str = "bold",
             limit: int = MAX_ITEMS) -> None:
    text.append(f"\n{title}\n", style=style)
    if not lines:
        text.append(f"  {empty}\n", style="italic")
    for line in lines[:limit]:
        text.append(f"  • {line}\n")
    if len(lines) > limit:
        text.append(f"  … {len(lines) - limit} more\n", style="dim")


def chart_summary(chart: dict) -> Text:
    patient = chart.get("patient") or chart.get("demographics") or {}
    text = Text()
    text.append(f"{patient.get('name', 'Unknown name')}\n", style="bold")
    age = f"{patient['age']} y" if patient.get("age") is not None else None
    text.append(_join(patient.get("sex"), age, f"born {patient['birth_date']}" if patient.get("birth_date") else None) + "\n")
    text.append(_join("MRN", patient.get("mrn")) + f"  ID {patient.get('patient_id', '?')}\n", style="dim")
    if chart.get("synthetic_demo_record"):
        text.append("Synthetic demo record\n", style="italic")
    status, allergies = allergy_status(chart)
    if status == "recorded":
        _section(text, "ALLERGIES", allergies, "", style="bold red")
    else:
        _section(text, "ALLERGIES", [], allergies[0], style="bold red")
    problems = [
        _join(p.get("display") or p.get("name"), f"(since {str(p['onset_date'])[:10]})" if p.get("onset_date") else None)
        if isinstance(p, dict) else str(p)
        for p in _items(chart, "active_problems", "problems")
        if not isinstance(p, dict) or p.get("clinical_status", "active") in ("active", "recurrence", "relapse")
    ]
    _section(text, "ACTIVE PROBLEMS", problems, "none recorded")
    def _order(m) -> str:
        return _join(m.get("medication_name") or m.get("name"), m.get("dosage"), m.get("frequency")) \
            if isinstance(m, dict) else str(m)

    def _status(m) -> str:
        return (m.get("status") or "active") if isinstance(m, dict) else "active"

    orders = _items(chart, "medications")
    _section(text, "MEDICATIONS", [_order(m) for m in orders if _status(m) not in ("on-hold", "stopped", "completed")],
             "none recorded")
    held = [_order(m) for m in orders if _status(m) == "on-hold"]
    if held:  # held, stopped and completed orders apart from the active ones
        _section(text, "HELD", held, "none")
    past = [f"{_order(m)} ({_status(m)})" for m in _items(chart, "past_medications")]
    if past:
        _section(text, "STOPPED OR COMPLETED", past, "none", limit=MAX_NOTES)
    labs = [_result_line(x) if isinstance(x, dict) else str(x) for x in _items(chart, "labs")]
    _section(text, "RECENT LABS", labs, "none recorded")
    vitals = [_result_line(x) if isinstance(x, dict) else str(x) for x in _items(chart, "vitals")]
    _section(text, "VITALS", vitals, "none recorded")
    notes = [_note_line(n) if isinstance(n, dict) else str(n) for n in _items(chart, "recent_notes", "notes")]
    _section(text, "RECENT NOTES", notes, "none recorded", limit=MAX_NOTES)
    return text


class PatientPanel(VerticalScroll):
    can_focus = True

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.border_title = "Patient"
        self.patient_id: str | None = None

    def compose(self):
        yield Static("No patient open.\nCtrl+O searches by name.", markup=False, id="patient-body")

    def _body(self) -> Static:
        return self.query_one("#patient-body", Static)

    def show_loading(self, patient_id: str, name: str | None) -> None:
        self.patient_id = patient_id
        self.border_title = f"Patient {patient_id}"
        self._body().update(Text(f"Loading the chart of {name or patient_id}…"))

    def show_chart(self, patient_id: str, chart: dict) -> None:
        self.patient_id = patient_id
        self.border_title = f"Patient {patient_id}"
        self._body().update(chart_summary(chart))
        self.scroll_home(animate=False)

    def show_problem(self, patient_id: str, message: str) -> None:
        self.patient_id = patient_id
        self.border_title = f"Patient {patient_id}"
        self._body().update(Text(f"The chart could not be loaded: {message}\n"
                                 "Questions still carry this patient ID."))

    def show_none(self) -> None:
        self.patient_id = None
        self.border_title = "Patient"
        self._body().update(Text("No patient open.\nCtrl+O searches by name."))
