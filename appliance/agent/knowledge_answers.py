"""Answers to knowledge look-ups in code's words, from the source as it answered
(docs/design.md §4.8): a label's boxed warning, contraindications and major warnings; an
interaction's severity, effect and what to do; each article's title, journal, year and PMID;
each trial's NCT id, phase, status and conditions; the source and its date on every answer.

Invariants:
- Every fact written here is read from the tool's result dict; nothing is added from memory,
  and nothing a result holds is reworded into a claim it does not make.
- What is missing is said plainly: a drug the local data does not hold is "not in this
  appliance's drug data" with how a site adds labels, never a guess; a pair with no entry is
  "no interaction recorded in the local data", which the answer says is not "no interaction".
- No record ids beyond what the clinician reads in a source (a PMID, an NCT id).
"""

from __future__ import annotations

import re

from mcp_servers.contracts import NOT_IN_DATABASE_CAVEATS, drugs_not_found
from mcp_servers.knowledge.trial_criteria import age_range_text

IMPORT_HINT = "`appliance knowledge import openfda FILE` adds FDA labels"
MAX_ARTICLES = 5
MAX_TRIALS = 5
# Words that ask what the label summary does not hold (indications, dosing, mechanism).
_BEYOND_LABEL = re.compile(r"\b(?:used\s+(?:for|to)|uses?\b|indicat\w*|what\s+is|what's|tell\s+me\s+about|doses?|dosing|"
                           r"dosages?|how\s+does|mechanism|work)\b", re.IGNORECASE)


def _date(value: str | None) -> str | None:
    """A source date as YYYY-MM-DD (openFDA writes 20230115; the store writes ISO times)."""
    if not value:
        return None
    text = str(value)
    if re.fullmatch(r"\d{8}", text):
        return f"{text[:4]}-{text[4:6]}-{text[6:]}"
    return text[:10]


def _dated(source: str | None, label_date: str | None, updated: str | None) -> str:
    source = (source or "the appliance's local drug data").rstrip(". ")
    if _date(label_date):
        return f"Source: {source} (label effective {_date(label_date)})."
    if _date(updated):
        return f"Source: {source} (in this appliance's data since {_date(updated)})."
    return f"Source: {source}."


def not_in_data(names, drug_count: int | None, tool: str = "check_drug_safety") -> str:
    """The plain sentence for drugs the local data does not hold, with the tool's caveat."""
    names = list(names)
    quoted = ", ".join(names)
    held = f"{drug_count} drugs; " if drug_count else ""
    verb = "is" if len(names) == 1 else "are"
    caveat = NOT_IN_DATABASE_CAVEATS.get(tool, NOT_IN_DATABASE_CAVEATS["check_drug_safety"])
    what = "interaction" if tool == "check_drug_interactions" else "safety"
    return (f"{quoted} {verb} not in this appliance's drug data ({held}{IMPORT_HINT}): no {what} information is "
            f"available for {'it' if len(names) == 1 else 'them'} here ({caveat}).")


def safety(result: dict, question: str = "") -> str:
    drug = result.get("drug") or result.get("matched_name") or "the drug"
    about = [x for x in (result.get("drug_class"),) if x]
    brands = result.get("brand_names") or []
    if brands:
        about.append("brands: " + ", ".join(brands[:6]))
    lines = [f"{drug.capitalize()}" + (f" ({'; '.join(about)})" if about else "") + ": from its label summary."]
    if result.get("boxed_warning"):
        lines.append(f"Boxed warning: {result['boxed_warning']}")
    else:
        lines.append("Boxed warning: none in the label summary.")
    for title, key in (("Contraindications", "contraindications"), ("Major warnings", "major_warnings")):
        items = result.get(key) or []
        if items:
            lines.append(f"{title}:")
            lines += [f"- {item}" for item in items]
        else:
            lines.append(f"{title}: none listed in the label summary.")
    if result.get("clipped"):
        lines.append("(Some label text was shortened here; the full text is in the drug data.)")
    if _BEYOND_LABEL.search(question):
        lines.append("The local drug data holds the label's warnings and contraindications, not its indications or "
                     "dosing: check the full label for those.")
    if result.get("demo_content"):
        lines.append("This is demo starter content written for the appliance: verify against the current label.")
    lines.append(_dated(result.get("source"), result.get("label_date"), result.get("updated_at")))
    return "\n".join(lines)


def interactions(result: dict, drug_count: int | None = None) -> str:
    checked = [d.get("generic_name") or d.get("name") for d in result.get("drugs_checked") or []]
    lines = [f"Interaction check of {', '.join(checked)} in the local drug data:"]
    found = result.get("interactions") or []
    pairs_with = set()
    for item in found:
        a, b = item.get("drugs") or ["?", "?"]
        pairs_with.add(frozenset((a, b)))
        lines.append(f"- {a} + {b}: {item.get('severity')}. Effect: {item.get('mechanism')} "
                     f"What to do: {item.get('management')}")
        lines.append("  " + _dated(item.get("source"), None, item.get("updated_at")))
    for mention in result.get("label_mentions") or []:
        a, b = mention.get("drugs") or ["?", "?"]
        pairs_with.add(frozenset((a, b)))
        lines.append(f"- {a} + {b}: no entry in the interaction table; {mention.get('label_of')}'s label says: "
                     f"\"{mention.get('excerpt')}\"")
    unique = list(dict.fromkeys(checked))
    missing = [(a, b) for i, a in enumerate(unique) for b in unique[i + 1:] if frozenset((a, b)) not in pairs_with]
    for a, b in missing:
        lines.append(f"- {a} + {b}: no interaction recorded in the local data for {a} and {b}. That is not the same as "
                     "no interaction: the local data is not exhaustive.")
    for names in result.get("same_drug_given_twice") or []:
        lines.append(f"- {' and '.join(names)} are the same drug.")
    if result.get("not_recognised"):
        lines.append(not_in_data(result["not_recognised"], drug_count, "check_drug_interactions"))
    for name, candidates in (result.get("ambiguous") or {}).items():
        lines.append(f"- '{name}' could be several drugs ({', '.join(candidates)}): name the generic to check it.")
    if any(item.get("demo_content") for item in found):
        lines.append("Entries marked as demo starter content were written for the appliance: verify against current labeling.")
    return "\n".join(lines)


def literature(result: dict) -> str:
    articles = result.get("articles") or []
    lines = [f"From the local literature library ({result.get('count', len(articles))} articles match "
             f"\"{result.get('query')}\"):"]
    for i, a in enumerate(articles[:MAX_ARTICLES], 1):
        journal = f"{a.get('journal')}, " if a.get("journal") else ""
        lines.append(f"{i}. {a.get('title')} ({journal}{a.get('year')}). PMID {a.get('pmid')}.")
    if len(articles) > MAX_ARTICLES:
        lines.append(f"({len(articles) - MAX_ARTICLES} more in the library.)")
    if any(a.get("demo_paraphrase") for a in articles):
        lines.append("Citations are from PubMed; the abstracts stored with the demo articles are paraphrases written "
                     "for the appliance, not the published abstracts.")
    lines.append("Source: the appliance's local literature library (MEDLINE/PubMed citations), dated by each article's "
                 "year above.")
    return "\n".join(lines)


def _trial_line(t: dict) -> str:
    bits = [t.get("phase") or "phase not stated", t.get("status") or "status not stated"]
    conditions = ", ".join((t.get("conditions") or [])[:4])
    if conditions:
        bits.append("conditions: " + conditions)
    if t.get("last_update"):
        bits.append(f"updated {_date(t['last_update'])}")
    demo = " [demo record, not a real study]" if t.get("demo_record") else ""
    return f"- {t.get('nct_id')}: {t.get('title')} ({'; '.join(bits)}){demo}"


def trials(result: dict) -> str:
    found = result.get("trials") or []
    filters = {k: v for k, v in (result.get("filters") or {}).items() if v is not None and k != "page_size"}
    said = "; ".join(f"{k.replace('_', ' ')} {v}" for k, v in filters.items())
    lines = [f"Clinical trials for \"{result.get('condition')}\" in the local trial cache"
             + (f" ({said})" if said else "") + f": {result.get('total_matches', len(found))} match"
             + ("" if result.get("condition_match") in (None, "all words") else " some of the words") + "."]
    lines += [_trial_line(t) for t in found[:MAX_TRIALS]]
    if len(found) > MAX_TRIALS:
        lines.append(f"({len(found) - MAX_TRIALS} more listed by the search.)")
    lines.append("Source: the appliance's local copy of ClinicalTrials.gov records (status as of each record's last "
                 "update; check ClinicalTrials.gov before referring a patient).")
    return "\n".join(lines)


def trial_details(result: dict) -> str:
    ages = result.get("ages") or (age_range_text(result.get("minimum_age"), result.get("maximum_age"))
                                  if result.get("minimum_age") or result.get("maximum_age") else None)
    lines = [_trial_line(result), f"Ages: {ages or 'not stated'}; sex: {result.get('sex') or 'not stated'}."]
    for title, key in (("Inclusion criteria", "inclusion_criteria"), ("Exclusion criteria", "exclusion_criteria")):
        items = result.get(key) or []
        if items:
            lines.append(f"{title}:")
            lines += [f"- {c}" for c in items[:12]]
            if len(items) > 12:
                lines.append(f"({len(items) - 12} more)")
    notes = [str(n) for n in result.get("eligibility_notes") or []]
    if notes:
        lines.append("Eligibility notes:")
        lines += [f"- {n}" for n in notes[:6]]
    if not (result.get("inclusion_criteria") or result.get("exclusion_criteria") or notes):
        lines.append(str(result.get("note") or "Eligibility criteria: not in the local trial cache."))
    lines.append("Source: the appliance's local copy of the ClinicalTrials.gov record.")
    return "\n".join(lines)


def prescreen(result: dict) -> str:
    found = result.get("trials") or []
    condition = result.get("condition_searched")
    lines = ["Trial prescreen" + (f" for {condition}" if condition else "") + f" from {result.get('facts_used', 0)} chart facts:"]
    for t in found:
        lines.append(f"- {t.get('nct_id')}: {t.get('title')}: {str(t.get('verdict') or '').upper()}. {t.get('explanation') or ''}".rstrip())
        lines += [f"  To check: {q}" for q in t.get("questions") or []]
    if result.get("note"):
        lines.append(str(result["note"]))
    lines.append("Source: the patient's chart and the appliance's local trial cache.")
    return "\n".join(lines)


def unknown_drug_error(tool: str, raw_error: str | None, args: dict, drug_count: int | None) -> str:
    """The plain sentence for a safety or interaction call the data could not answer because
    it does not hold the drugs: the names the server gives (only those are read from its
    text), else the call's own drug."""
    names = drugs_not_found(raw_error or "") or tuple(args.get("drug_names") or (args.get("drug_name") or "the drug",))
    return not_in_data(names, drug_count, tool)


RENDERERS = {"check_drug_interactions": interactions, "search_medical_literature": literature,
             "find_clinical_trials": trials, "get_trial_details": trial_details, "prescreen_for_trials": prescreen}

__all__ = ["IMPORT_HINT", "RENDERERS", "interactions", "literature", "not_in_data", "prescreen", "safety",
           "trial_details", "trials", "unknown_drug_error"]
