"""The clinic terminal: a Textual front end over the agent core.

Invariant: this package imports the core; the core never imports it (the floor plan in
pyproject.toml, checked by tests/test_floor_plan.py and tests/test_import_hygiene.py).
"""

from common.offline import no_phone_home

no_phone_home()
