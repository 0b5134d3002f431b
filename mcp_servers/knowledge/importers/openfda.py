"""openFDA drug labels -> knowledge-store drugs (one label at a time, for ``knowledge.importers.driver``).

Invariants:
- Only single-ingredient labels harmonised by openFDA (``openfda.generic_name``) with a boxed
  warning, contraindication or warning section become drugs; every other label is skipped with
  its reason.
- Several labels for one generic keep the most informative one (boxed warning, then prescription
  over OTC, then the latest effective date); brand names from all of them are kept. A starter
  record with a boxed warning is never replaced by a label without one.
- ``openfda`` that is not an object makes the record malformed (``MalformedRecord``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from mcp_servers.knowledge.importers.records import (
    KnowledgeImportReport,
    MalformedRecord,
    object_of,
    strings,
)
from mcp_servers.knowledge.names import display_name, name_key, strip_salt
from mcp_servers.knowledge.writes import generic_for, get_drug, upsert_drug

_HEADING = re.compile(
    r"^\s*(\d+(\.\d+)*\s+)?(BOXED WARNING|CONTRAINDICATIONS|WARNINGS AND PRECAUTIONS|WARNINGS|DRUG INTERACTIONS|Do not use)\b\s*:?\s*"
)


def _texts(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value] if value else []
    return [t for t in (_HEADING.sub("", str(i)).strip() for i in items) if t]


def _label_rank(drug: dict) -> tuple:
    return (
        1 if drug.get("boxed_warning") else 0,
        1 if drug.get("product_type") == "HUMAN PRESCRIPTION DRUG" else 0,
        drug.get("effective_time") or "",
        drug.get("source_id") or "",
    )


def _stored_drug(row: dict) -> dict:
    out = dict(row)
    for column in ("brand_names", "synonyms", "contraindications", "major_warnings"):
        out[column] = json.loads(row[column] or "[]")
    return out


def _label_to_drug(db, label: dict) -> tuple[dict | None, str | None]:
    if label.get("openfda") is not None and not isinstance(label.get("openfda"), dict):
        raise MalformedRecord("openfda is not an object")
    openfda = object_of(label.get("openfda"))
    generics = strings(openfda.get("generic_name"))
    if not generics:
        return None, "no openfda.generic_name (label not harmonised by openFDA)"
    substances = strings(openfda.get("substance_name"))
    if len(generics) > 1 or len(substances) > 1 or re.search(r",| and | with |/", generics[0].lower()):
        return None, "combination or multi-ingredient product"
    boxed = "\n".join(_texts(label.get("boxed_warning"))) or None
    contraindications = _texts(label.get("contraindications")) or _texts(label.get("do_not_use"))
    warnings = _texts(label.get("warnings_and_cautions")) or _texts(label.get("warnings"))
    if not (boxed or contraindications or warnings):
        return None, "no boxed warning, contraindication or warning sections"
    generic = generic_for(db, generics[0]) or strip_salt(name_key(generics[0]))
    generic_keys = {name_key(g) for g in generics} | {generic}
    brands = [display_name(b) for b in strings(openfda.get("brand_name")) if strip_salt(name_key(b)) not in generic_keys]
    full_name = name_key(generics[0])
    set_id = str(label.get("set_id") or label.get("id") or "unknown")
    effective = label.get("effective_time") if isinstance(label.get("effective_time"), str) else None
    return {
        "generic_name": generic,
        "brand_names": brands,
        "synonyms": [full_name] if full_name != generic else [],
        "drug_class": (strings(openfda.get("pharm_class_epc")) or [None])[0],
        "boxed_warning": boxed,
        "contraindications": contraindications,
        "major_warnings": warnings,
        "label_interactions": "\n".join(_texts(label.get("drug_interactions"))) or None,
        "source": f"openFDA drug label (set_id {set_id}, effective {effective or 'unknown'}): manufacturer label text",
        "source_id": set_id,
        "product_type": (strings(openfda.get("product_type")) or [None])[0],
        "effective_time": effective,
        "demo": False,
    }, None


def handle_label(db, label: Any, report: KnowledgeImportReport) -> None:
    if not isinstance(label, dict):
        report.skipped["not a label object"] += 1
        return
    drug, reason = _label_to_drug(db, label)
    if drug is None:
        report.skipped[reason] += 1
        return
    row = get_drug(db, drug["generic_name"])
    origin = "import"
    if row is not None:
        existing = _stored_drug(row)
        keep = None
        if existing["origin"] == "import" and existing["source_id"] != drug["source_id"] \
                and _label_rank(existing) > _label_rank(drug):
            keep = "another label for an already-imported drug kept (brand names merged)"
        elif existing["origin"] == "starter" and existing["boxed_warning"] and not drug["boxed_warning"]:
            # Never lose a boxed warning to a label without one (e.g. an OTC Drug Facts label).
            keep = "demo record kept: it has a boxed warning and the imported label has none (brand names merged)"
        if keep:
            report.notes[keep] += 1
            origin = existing["origin"]
            drug = {**existing, "brand_names": existing["brand_names"] + drug["brand_names"],
                    "synonyms": existing["synonyms"] + drug["synonyms"]}
        else:
            drug["brand_names"] = existing["brand_names"] + drug["brand_names"]
            drug["synonyms"] = existing["synonyms"] + drug["synonyms"]
            drug["drug_class"] = drug["drug_class"] or existing["drug_class"]
    report.count(upsert_drug(db, drug, origin))
