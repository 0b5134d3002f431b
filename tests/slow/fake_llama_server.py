"""A stand-in for llama.cpp's ``llama-server`` with the command line ``models.llama_server.command``
builds: it listens where ``--host`` says (a Unix socket path ending in ``.sock``, or an address
with ``--port``), asks for the key in ``$LLAMA_API_KEY`` as llama-server does, and answers
``/health``, ``/props`` and a streamed ``/completion``. It records its command line and whether
it got a key in ``$FAKE_LLAMA_RECORD`` (a JSON file), so a test can check what the host gave it.
Tests point ``APPLIANCE_LLAMA_SERVER`` at a wrapper that runs it: the clinic host's key handling
is tested without a model (and on machines where the real binary cannot run)."""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    args: dict[str, str] = {}
    for i, word in enumerate(argv):
        if word.startswith("--"):
            following = argv[i + 1] if i + 1 < len(argv) else ""
            args[word] = "" if following.startswith("--") else following
    key = os.environ.get("LLAMA_API_KEY", "")
    alias = args.get("--alias", "gemma3-270m")
    record = os.environ.get("FAKE_LLAMA_RECORD")
    if record:
        with open(record, "w", encoding="utf-8") as fh:
            json.dump({"argv": argv, "had_key": bool(key)}, fh)

    async def anything(request):
        if request.url.path == "/health":
            return JSONResponse({"status": "ok"})
        if key and request.headers.get("authorization") != f"Bearer {key}":
            return JSONResponse({"error": {"code": 401, "message": "Invalid API Key"}}, status_code=401)
        if request.url.path == "/props":
            return JSONResponse({"model_alias": alias, "default_generation_settings": {"n_ctx": 8192}})
        if request.url.path == "/completion":
            async def events():
                for piece in ("fake ", "answer"):
                    yield f"data: {json.dumps({'content': piece, 'stop': False})}\n\n".encode()
                yield f"data: {json.dumps({'content': '', 'stop': True})}\n\n".encode()
            return StreamingResponse(events(), media_type="text/event-stream")
        return JSONResponse({"path": request.url.path})

    app = Starlette(routes=[Route("/{p:path}", anything, methods=["GET", "POST"])])
    host = args.get("--host", "127.0.0.1")
    if host.endswith(".sock"):
        uvicorn.run(app, uds=host, log_level="warning")
    else:
        uvicorn.run(app, host=host, port=int(args.get("--port", "8080")), log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
