"""Medications as code reads them: drug names (``names``: the recogniser, brand and combination
names to generic names), orders (``orders``: a clinician's order parsed into drug, dose, unit,
route, frequency, as-needed maximum and duration; ``sig_reading``: what an as-needed order is
for, quantity, refills, a bare dose) and what an order amounts to per day; ``sig``: the order in
FHIR MedicationRequest shapes; ``changes``: a change to an order on the chart (new dose or
frequency, stop, hold, resume, renew); ``spelling``: the drug a misspelt name likely means.

Nothing here calls a model, a server or the network; it sits below the agent and the safety
gate, which both read orders and names through it, so the two never disagree about what was
ordered.
"""
