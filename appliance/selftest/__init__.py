"""``appliance selftest`` and ``appliance smoke``: the checks an installed appliance runs on
itself, each in a private data home, so none touches the clinic's record.

Modules: ``suite`` (the self-test: runs the checks below in order and reports), ``bad_input``
(generated wrong calls to every tool), ``injection`` (the prompt-injection corpus),
``faults`` (servers crashed mid-call), ``tamper`` (the record edited behind the audit chain),
``host_checks`` (the clinic host's refusals), ``smoke`` (the integration scenarios on the real
model).
"""
