"""Site acceptance of the installed model (``appliance model accept``, README "Model acceptance").

One module per job: ``cases`` (the shipped acceptance set), ``nodes`` (the agent's model calls
on it), ``turns`` (whole turns on a subset), ``evaluations`` (TrialGPT, grounding, extraction
through their own code), ``figures`` (intervals and latency), ``thresholds`` (the verdict),
``store`` (results keyed by the model file's sha256), ``run`` (a resumable run directory) and
``report`` (the table).

Invariants:
- Nothing here loads a model or starts a server by itself: callers hand in the model and
  the tool box (``appliance.cli.acceptance``), so tests run it on a scripted model.
- Nothing here imports ``appliance.runtime``: the runtime asks the store about acceptance.
"""
