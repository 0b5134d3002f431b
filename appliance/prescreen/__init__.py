"""Trial prescreening (seed 004, docs/design.md §16): is this patient eligible for any trials in
the local ClinicalTrials.gov cache?

``facts`` builds the patient's key facts from the chart, ``search`` finds candidate trials under
a code-bounded budget, ``evaluate`` judges one criterion with one constrained model call,
``aggregate`` turns judgements into a verdict by rule, ``run`` ties them together (the CLI's
``appliance prescreen``), and ``tool`` offers the pipeline to the agent as its
``prescreen_for_trials`` tool.

Invariant: nothing here imports the agent graph (``appliance.agent``); the graph uses ``tool``.
"""
