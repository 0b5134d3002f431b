"""The open patient, always in sight: name, age, sex and allergies in one or two lines above
the conversation, hidden when no patient is open.

Invariant: allergies use the wording of ``tui.chart_words`` and stand out in the error colour
(with the word ALLERGIES, so a 16-colour console still reads it); text is never parsed as markup.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tui.chart_words import allergy_status, allergy_text, identity_line


def banner_text(chart: dict) -> Text:
    text = Text(identity_line(chart), style="bold")
    text.append("\n")
    return text.append_text(allergy_text(*allergy_status(chart)))


class PatientBanner(Static):
    def __init__(self, **kwargs) -> None:
        super().__init__("", markup=False, **kwargs)
        self.display = False
        self.patient_id: str | None = None

    def show_loading(self, patient_id: str, name: str | None) -> None:
        self.patient_id = patient_id
        self.update(Text(f"{name or patient_id} · loading the chart…\nAllergies: not yet loaded", style="bold"))
        self.display = True

    def show_chart(self, patient_id: str, chart: dict) -> None:
        self.patient_id = patient_id
        self.update(banner_text(chart))
        self.display = True

    def show_problem(self, patient_id: str) -> None:
        self.patient_id = patient_id
        self.update(Text(f"Patient {patient_id} · chart not loaded\nAllergies: unknown (chart not loaded)",
                         style="bold yellow"))
        self.display = True

    def show_none(self) -> None:
        self.patient_id = None
        self.update("")
        self.display = False
