"""llama.cpp's log output, routed so that only errors reach the clinician's terminal.

Invariant: one C callback per process, kept referenced here (llama.cpp holds only its
pointer); it is installed when the first model is loaded, and mtmd's logs go through the same
callback once it exists.
"""

from __future__ import annotations

import sys

_GGML_LOG_ERROR, _GGML_LOG_CONT = 4, 5  # ggml_log_level: NONE 0, DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5
_log_callback = None


def quiet_llama_logs(llama_cpp) -> None:
    """Let only llama.cpp errors reach stderr.

    llama-cpp-python 0.3.36 maps an older ggml level enum, so with ``verbose=False`` it still
    prints warnings (such as the SWA-cache notice at every load) into the clinician's terminal.
    """
    global _log_callback
    if _log_callback is None:
        printing = [False]  # a CONT piece continues the previous message

        @llama_cpp.llama_log_callback
        def callback(level, text, user_data):
            if level != _GGML_LOG_CONT:
                printing[0] = level == _GGML_LOG_ERROR
            if printing[0]:
                sys.stderr.write(text.decode("utf-8", "replace"))

        _log_callback = callback
        llama_cpp.llama_log_set(_log_callback, None)


def quiet_mtmd_logs(mtmd) -> None:
    """Route mtmd's logs through the same callback (errors only), once a model has set it."""
    if _log_callback is not None:
        mtmd.mtmd_log_set(_log_callback, None)
        mtmd.mtmd_helper_log_set(_log_callback, None)
