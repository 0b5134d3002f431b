"""``appliance bench``: performance figures (decoding and turns, the clinic host, tool and trial
search latency), measured on real parts, printed, never asserted: targets live here, not in tests.

Modules: ``decoding`` (the model's decoding and turn figures, criteria throughput), ``clinic``
(terminals sharing one clinic host), ``contention`` (turns idle and beside busy processes, which
``busy`` starts and stops), ``tools`` (tool latency over stdio), ``trials`` (trial search on a
large cache), ``timing`` (the calls-timed-over-stdio helpers the last two share).
"""
