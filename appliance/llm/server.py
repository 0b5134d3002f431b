"""The second runtime: the same prompts and grammars, sent to llama.cpp's own server
(``llama-server``, started by ``appliance serve`` on the clinic host; ``models.llama_server``).

Invariants:
- Same interface, same prompts, same constraint: a prompt is rendered by ``prompt.render_parts``
  and tokenized part by part by the server's own tokenizer (markers as control tokens, text
  with special-token parsing off), and sent as token ids, so a clinician's ``<end_of_turn>``
  stays text here too. A constrained call is the fast decoder's walk (``server_decoding``: fixed
  text fed in batches, one request a choice or a free string) for every schema it handles, as
  in process; ``decoder="grammar"`` and other schemas send the schema's whole GBNF grammar
  (``grammar.output_schema``) to llama.cpp's grammar sampler. Either way the answer is in the
  language both in-process decoders produce and is validated before it is returned.
- The profile is the host's: the server's model alias names it, so the demo notice follows the
  model that actually answers, whatever this terminal was configured with.
- Free and grammar calls stream, so ``cancel`` (and ``on_token``) work as in process: a
  cancelled call closes its connection and llama-server stops that request. The fast walk's
  requests are short and not streamed; a cancel shuts the one in flight and ends the walk.
- Context fitting is the same rule (``fit.fit_messages``) with the server's token counts and
  its per-request context. ``max_tokens`` is respected. The fast walk closes strings early to
  fit it, as in process. On the grammar path a constrained output the limit would cut is
  ended too: the first request keeps back the characters the longest ending
  can take (``closing.closing_reserve``; at most half the budget), and a cut output is
  continued by a second, short request whose grammar closes the open string and gives every
  later free string its minimum (``closing.closing``); the model still makes every later
  choice. A call costs at most max(max_tokens, max_tokens // 2 + reserve) tokens.
- A host that cannot be reached raises ``ModelServerUnavailable`` (a ``GenerationError``, so
  the agent's error templates apply); a refused key raises ``ConfigError``. No prompt text is
  put in an error message or a log line.
- Images when the host's server has a vision projector (its /props say so): the same image
  prompt and walk as in process (``analyze_image``); otherwise ``vision_available`` is False and
  the agent says the image was not analysed.
- Only the standard library speaks HTTP (``server_http``). Each request has its own connection;
  a lock guards only the tokenizer cache and context fitting, so requests can decode side by
  side in the server's parallel slots: ``generate_constrained_batch`` (the prescreen's criterion
  calls) sends up to ``min(parallel, the server's slots)`` at once. ``last_stats`` and
  ``last_text`` are those of the last single call.
"""

from __future__ import annotations

import base64
import ssl
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from appliance.errors import (
    ConfigError,
    GenerationCancelled,
    GenerationError,
    GenerationTruncated,
)
from appliance.llm import vision
from appliance.llm.base import CallStats, T, TokenCallback, parse_constrained
from appliance.llm.batch import BatchJob, BatchResult
from appliance.llm.closing import closing, closing_reserve
from appliance.llm.fast import BudgetExceeded, Cancelled, fast_handles
from appliance.llm.fit import Fitted, fit_messages
from appliance.llm.grammar import OutputSchema, accepts, max_output_chars, output_schema
from appliance.llm.prompt import (
    Message,
    Part,
    render_gemma,
    render_parts,
    tokenize_parts,
)
from appliance.llm.server_decoding import OffOptions, ServerSchemaDecoder, ServerSteps
from appliance.llm.server_http import (
    FIRST_BYTE_SECONDS,
    ModelServerUnavailable,
    ServerHttp,
)
from models.profiles import ModelProfile, get_profile

TOKEN_CACHE = 4096  # tokenized text parts kept (system texts and markers repeat in every call)


class ServerModel:
    """A model on the clinic host behind the LanguageModel interface."""

    def __init__(self, url: str, *, key: str | None = None, context: ssl.SSLContext | None = None,
                 timeout: float = FIRST_BYTE_SECONDS):
        """``key``: this terminal's (``mcp_servers.access.token_digest`` of its token);
        ``context``: HTTPS trust (None: the system's)."""
        self._http = ServerHttp(url, key=key, context=context, timeout=timeout)
        self.url = self._http.url
        self._lock = threading.Lock()
        self.last_stats: CallStats | None = None
        self.last_text = ""
        props = self._request("GET", "/props")
        alias = props.get("model_alias") or ""
        try:
            self.profile: ModelProfile = get_profile(alias)
        except ConfigError:
            raise ConfigError(f"the model server at {self.url} runs {alias!r}, which is no profile this "
                              f"appliance knows") from None
        self.profile_name = self.profile.name
        # A request's context: the slot's, never more than the profile's (what the in-process model has).
        self.n_ctx = min(int(props["default_generation_settings"]["n_ctx"]), self.profile.n_ctx)
        self.slots = max(1, int(props.get("total_slots") or 1))
        self._vision = bool((props.get("modalities") or {}).get("vision"))
        self._marker = str(props.get("media_marker") or vision.DEFAULT_MARKER)
        self._tokens = lru_cache(maxsize=TOKEN_CACHE)(self._tokenize_uncached)
        self._pieces = lru_cache(maxsize=TOKEN_CACHE)(self._piece_uncached)

    # -- HTTP (``server_http``; one method each, so a test can watch every request) ------------
    def _request(self, method: str, path: str, body: dict | None = None,
                 cancel: threading.Event | None = None) -> dict:
        return self._http.request(method, path, body, cancel)

    def _stream(self, body: dict, cancel: threading.Event | None) -> Iterator[dict]:
        return self._http.stream(body, cancel)

    # -- tokens -----------------------------------------------------------------------------
    def _tokenize_uncached(self, text: str, bos: bool, special: bool) -> tuple[int, ...]:
        out = self._request("POST", "/tokenize", {"content": text, "add_special": bos, "parse_special": special})
        return tuple(out["tokens"])

    def _detokenize(self, tokens: list[int]) -> str:
        return self._request("POST", "/detokenize", {"tokens": tokens})["content"]

    def _piece_uncached(self, token: int) -> str:
        return self._detokenize([token])

    def _text_tokens(self, text: str) -> list[int]:
        with self._lock:
            return list(self._tokens(text, False, False))

    def _piece(self, token: int) -> str:
        with self._lock:
            return self._pieces(token)

    def prompt_tokens(self, parts: Sequence[Part]) -> list[int]:
        """Token ids of ``parts``, by the server's tokenizer (each distinct part asked once)."""
        return tokenize_parts(lambda text, bos, special: list(self._tokens(text, bos, special)), parts, bos=True)

    def count_prompt(self, messages: Sequence[Message]) -> int:
        return len(self.prompt_tokens(render_parts(messages)))

    def tokenize_count(self, text: str) -> int:
        with self._lock:
            return len(self._tokens(text, True, False))

    def _fit(self, messages: Sequence[Message], reserve: int) -> Fitted:
        return fit_messages(messages, self.count_prompt, self.n_ctx - reserve)

    # -- interface --------------------------------------------------------------------------
    def generate_constrained(
        self, node: str, messages: Sequence[Message], schema: type[T], *, temperature: float, max_tokens: int,
        decoder: str | None = None, cancel: threading.Event | None = None,
    ) -> T:
        """``decoder``: "fast" (the default: the fast decoder's walk, ``server_decoding``) or
        "grammar" (llama.cpp's grammar sampler over the whole output), as in process."""
        text, stats = self._constrained(node, messages, schema, temperature, max_tokens, cancel, decoder)
        self.last_text = text
        self.last_stats = stats
        return parse_constrained(text, schema)

    def generate_constrained_batch(self, jobs: Sequence[BatchJob], *, parallel: int = 4,
                                   **_in_process_only) -> list[BatchResult]:
        """Independent constrained calls side by side in the server's parallel slots (continuous
        batching there), at most ``min(parallel, slots)`` in flight: a ``BatchResult`` per job, in
        the jobs' order, with its text and validated value or its error, as in process."""
        from concurrent.futures import ThreadPoolExecutor

        for schema in {job.schema for job in jobs}:
            output_schema(schema)  # SchemaNotSupported before anything is sent

        def one(job: BatchJob) -> BatchResult:
            text = ""
            try:
                text, stats = self._constrained("CRITERION_BATCH", job.messages, job.schema, job.temperature,
                                                job.max_tokens, None)
                return BatchResult(text, parse_constrained(text, job.schema), None,
                                   sampled_tokens=stats.sampled_tokens, model_steps=stats.model_steps or stats.sampled_tokens)
            except GenerationError as exc:
                return BatchResult(text, None, exc)

        with ThreadPoolExecutor(max_workers=max(1, min(parallel, self.slots, len(jobs))),
                                thread_name_prefix="model-slot") as pool:
            return list(pool.map(one, jobs))

    def _constrained(self, node: str, messages: Sequence[Message], schema: type[T], temperature: float,
                     max_tokens: int, cancel: threading.Event | None, decoder: str | None = None,
                     ) -> tuple[str, CallStats]:
        derived = output_schema(schema)  # SchemaNotSupported before anything is sent
        if cancel is not None and cancel.is_set():
            raise GenerationCancelled(f"{node}: cancelled before it started")
        if (decoder or "fast") == "fast" and fast_handles(schema):
            return self._constrained_fast(node, messages, derived, temperature, max_tokens, cancel)
        # Every token adds a character: a grammar bounded within the budget ends by itself.
        # Otherwise keep back what the longest ending takes (in characters, so generously), but
        # never more than half the budget, and end a cut output in a second, bounded call.
        first = max_tokens
        if max_output_chars(schema) >= max_tokens:
            first = max(max_tokens - closing_reserve(schema), max_tokens // 2, 1)
        text, stats = self._complete(node, messages, temperature, first, cancel, grammar=derived.grammar)
        if stats.finish_reason == "length" and not accepts(schema, text):
            ending = closing(derived, text)
            if ending is None:
                raise GenerationTruncated(f"{node}: {schema.__name__} output hit max_tokens={first}")
            rest, more = self._complete(node, messages, temperature, ending.longest + 1, cancel,
                                        grammar=ending.grammar, after=text)
            if more.finish_reason == "length":
                raise GenerationTruncated(f"{node}: {schema.__name__}'s ending hit its bound")
            text += rest
            stats = replace(stats, completion_tokens=stats.completion_tokens + more.completion_tokens,
                            sampled_tokens=stats.sampled_tokens + more.sampled_tokens,
                            seconds=stats.seconds + more.seconds, eval_seconds=stats.eval_seconds + more.eval_seconds,
                            finish_reason="stop", closed_early=1)
        return text, stats

    def _constrained_fast(self, node: str, messages: Sequence[Message], derived: OutputSchema,
                          temperature: float, max_tokens: int, cancel: threading.Event | None,
                          ) -> tuple[str, CallStats]:
        with self._lock:
            fitted = self._fit(messages, max_tokens)
            prompt = self.prompt_tokens(render_parts(fitted.messages))
        steps = self._steps(list(prompt), temperature, cancel)
        text, stats = self._walk(node, steps, derived, max_tokens, cancel)
        return text, replace(stats, prompt_tokens=len(prompt), history_dropped=fitted.history_dropped,
                             results_shortened=fitted.results_shortened)

    def _steps(self, tokens: list[int], temperature: float, cancel: threading.Event | None, **image) -> ServerSteps:
        return ServerSteps(lambda body, stop: self._request("POST", "/completion", body, stop), self._text_tokens,
                           self._piece, tokens, temperature, cancel, **image)

    def _walk(self, node: str, steps: ServerSteps, derived: OutputSchema, max_tokens: int,
              cancel: threading.Event | None) -> tuple[str, CallStats]:
        """The fast decoder's walk on the server (``server_decoding``): its text and figures."""
        started = time.perf_counter()
        decoder = ServerSchemaDecoder(steps, steps.temperature, budget=max_tokens, cancel=cancel)
        try:
            text = decoder.decode(derived)
        except BudgetExceeded:
            raise GenerationTruncated(f"{node}: {derived.model.__name__} output hit max_tokens={max_tokens}") from None
        except (Cancelled, GenerationCancelled):
            raise GenerationCancelled(f"{node}: cancelled") from None
        except OffOptions as exc:
            raise ModelServerUnavailable(str(exc)) from None
        done = decoder.stats
        return text, CallStats(
            node=node, prompt_tokens=0, completion_tokens=done.fed_tokens + done.sampled_tokens,
            seconds=time.perf_counter() - started, finish_reason="stop", prefill_tokens=steps.prefill_tokens,
            cache_hit=steps.prefill_tokens < len(steps.tokens), eval_seconds=steps.eval_seconds,
            sampled_tokens=done.sampled_tokens, closed_early=done.closed_early, model_steps=done.model_steps,
        )

    # -- images: llama-server's multimodal projector (``appliance serve`` passes the profile's) --
    @property
    def vision_available(self) -> bool:
        """The host's server was started with a vision projector (its /props say so)."""
        return self._vision

    def analyze_image(self, image_path: str | Path, question: str, *,
                      cancel: threading.Event | None = None) -> vision.ImageFindings:
        """Structured findings of one PNG/JPEG by the host's model, as in process: the image
        prompt (``vision.image_messages`` with the server's media marker), then the fast
        decoder's walk (T=0.3, 512 tokens), the image sent with each of its requests."""
        if not self._vision:
            raise vision.VisionUnavailable("image analysis is unavailable: the clinic host's model server runs "
                                           "without a vision projector")
        image = vision.read_image(image_path)
        if cancel is not None and cancel.is_set():
            raise GenerationCancelled(f"{vision.NODE}: cancelled before it started")
        prompt = render_gemma(vision.image_messages(question, self._marker))
        steps = self._steps([], vision.TEMPERATURE, cancel, image=(prompt, base64.b64encode(image).decode("ascii")),
                            detokenize=self._detokenize)
        text, stats = self._walk(vision.NODE, steps, output_schema(vision.ImageFindings), vision.MAX_TOKENS, cancel)
        self.last_text, self.last_stats = text, stats
        return parse_constrained(text, vision.ImageFindings)

    def generate_free(
        self, node: str, messages: Sequence[Message], *, temperature: float, max_tokens: int,
        on_token: TokenCallback | None = None, cancel: threading.Event | None = None,
    ) -> str:
        text, stats = self._complete(node, messages, temperature, max_tokens, cancel, on_token=on_token)
        self.last_stats = stats
        return text

    def _complete(self, node: str, messages: Sequence[Message], temperature: float, max_tokens: int,
                  cancel: threading.Event | None, *, grammar: str | None = None,
                  on_token: TokenCallback | None = None, after: str = "") -> tuple[str, CallStats]:
        """One completion; ``after`` is output already generated, which the model continues."""
        started = time.perf_counter()
        pieces: list[str] = []
        with self._lock:  # the tokenizer cache and the fit; the request itself runs outside
            continued = list(self._tokenize_uncached(after, False, False)) if after else []
            fitted = self._fit(messages, max_tokens + len(continued))
            prompt = self.prompt_tokens(render_parts(fitted.messages)) + continued
        body = {"prompt": prompt, "n_predict": max_tokens,
                "temperature": temperature, "top_k": 40 if temperature > 0 else 1,
                "stop": list(self.profile.stop), "cache_prompt": True}
        if grammar is not None:
            body["grammar"] = grammar
        final: dict = {}
        try:
            for event in self._stream(body, cancel):
                piece = event.get("content", "")
                if piece:
                    pieces.append(piece)
                    if on_token is not None:
                        on_token(piece)
                if event.get("stop"):
                    final = event
        except GenerationCancelled:
            raise GenerationCancelled(f"{node}: cancelled after {len(pieces)} pieces") from None
        timings = final.get("timings", {})
        stop_type = final.get("stop_type", "")
        stats = CallStats(
            node=node, prompt_tokens=int(final.get("tokens_evaluated", 0)),
            completion_tokens=int(final.get("tokens_predicted", 0)), seconds=time.perf_counter() - started,
            finish_reason="length" if stop_type == "limit" else "stop",
            prefill_tokens=int(timings.get("prompt_n", 0)),
            cache_hit=int(timings.get("prompt_n", 0)) < int(final.get("tokens_evaluated", 0)),
            eval_seconds=(timings.get("prompt_ms", 0.0) + timings.get("predicted_ms", 0.0)) / 1000,
            sampled_tokens=int(final.get("tokens_predicted", 0)),
            history_dropped=fitted.history_dropped, results_shortened=fitted.results_shortened,
        )
        return "".join(pieces), stats
