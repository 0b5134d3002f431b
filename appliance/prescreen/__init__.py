"""Trial prescreening (seed 004, docs/design.md §16): is this patient eligible for any trials in
the local ClinicalTrials.gov cache?

``facts`` builds the patient's key facts from the chart, ``search`` finds candidate trials under
a code-bounded budget, ``decide`` settles every criterion the chart's structured facts decide
(``subject``, ``readers``, ``chart_readers``, ``vocab``), ``judge`` judges each remaining
criterion with one constrained model call and keeps only cited facts that bear on it
(``relevance``), ``aggregate`` turns judgements into a verdict by rule, ``run`` ties them
together (the CLI's ``appliance prescreen``), ``tool`` offers the pipeline to the agent as its
``prescreen_for_trials`` tool, and ``trialgpt`` measures the criterion step on TrialGPT's
expert annotations (``appliance eval trialgpt``).

Invariant: nothing here imports the agent graph (``appliance.agent``); the graph uses ``tool``.
"""
