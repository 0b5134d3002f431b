"""Medications as code reads them: drug names (``names``: the recogniser, brand and combination
names to generic names), orders (``orders``: a clinician's order parsed into drug, dose, unit,
route, frequency, as-needed maximum and duration) and what an order amounts to per day.

Nothing here calls a model, a server or the network; it sits below the agent and the safety
gate, which both read orders and names through it, so the two never disagree about what was
ordered.
"""
