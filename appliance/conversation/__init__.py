"""The conversation core both front ends use: the clinic terminal (``tui``) and the line session
(``appliance.line_session``) are views over one ``Conversation`` (``core``) that holds the
current patient (``current``), applies the one rule for a new conversation (``rule``), keeps the
history, and saves and resumes exchanges in the one sessions store; ``approval`` says what a
write's approval asks and what the clinician's answer means, ``patient_choice`` which patient the
clinician's words choose, and ``turn_outcome`` what a stopped turn wrote."""

from appliance.conversation.core import CodeAnswer, Conversation, Opened, resume_problem
from appliance.conversation.current import CurrentPatient, turn_patient
from appliance.conversation.rule import starts_new_conversation, turn_patients

__all__ = ["CodeAnswer", "Conversation", "CurrentPatient", "Opened", "resume_problem", "starts_new_conversation", "turn_patient",
           "turn_patients"]
