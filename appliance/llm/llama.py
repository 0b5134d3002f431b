"""The real runtime: one llama.cpp model per process, behind one lock.

Invariants:
- The model file is verified (exists, GGUF magic, sha256 when known) before llama.cpp opens
  it; a bad file raises ``ModelFileError``, never a crash.
- Every call into the llama.cpp object holds ``self._lock`` (llama.cpp is not thread-safe),
  including the whole iteration of a stream.
- Two constrained decoders produce the same output language: ``fast`` (default;
  ``appliance.llm.fast`` on llama.cpp's logits, with prompt-prefix reuse) and ``grammar``
  (llama-cpp-python's GBNF sampler over ``appliance.llm.grammar`` text, kept for comparison
  and for any schema the fast decoder does not handle).
- ``max_tokens`` is always respected; a generation that stops on the limit raises
  ``GenerationTruncated`` instead of returning half an object.
- An image call (``appliance.llm.vision``) holds the same lock and leaves the KV cache empty,
  so the next text prompt never reuses cells that hold image embeddings.
- Every prompt is fitted to the context before it is evaluated (``appliance.llm.fit``): the
  earlier exchanges go first, then long tool results are shortened; the question never is.
  Only the template's markers are tokenized as control tokens (``prompt.tokenize_parts``).
- Threads follow the machine (``appliance.llm.threads``): at the start of every call and before
  every evaluation, under the lock, the governor sets llama.cpp's decode and batch thread counts
  to the cores free now (never more; the operator's ``n_threads`` is fixed when given). The
  llama object's own ``n_threads``/``context_params`` say the same numbers, so a context made
  from them (the vision runtime's) starts with what is free; the batch runner's context is set
  to the batch count before each of its steps.
- Attention is computed as on the clinic host: flash attention, llama-server's default on CPU
  and the library default the batch runner's context gets. The same prompt then gives the same
  greedy text in process and on the host (without it, greedy text drifted apart within a few
  dozen tokens on some prompts), and a decode step is 6-8% shorter.
- This module sits above ``batch``, ``free`` and ``vision``: they never import it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from appliance.errors import (
    GenerationCancelled,
    GenerationError,
    GenerationTruncated,
    ModelFileError,
    SchemaNotSupported,
)
from appliance.llm import free, vision
from appliance.llm.base import CallStats, T, TokenCallback, parse_constrained
from appliance.llm.batch import BatchJob, BatchResult, BatchRunner, job_parts
from appliance.llm.context import DecoderBackend, PrefixCache
from appliance.llm.fast import BudgetExceeded, Cancelled, SchemaDecoder, fast_handles
from appliance.llm.fit import Fitted, fit_messages
from appliance.llm.grammar import output_schema
from appliance.llm.logs import quiet_llama_logs
from appliance.llm.prompt import Message, render_parts, split_parts, tokenize_parts
from appliance.llm.threads import ThreadGovernor, Threads, usable_cores
from appliance.llm.token_table import TokenTable
from models.profiles import ModelProfile
from models.projector import projector_problem
from models.verify import verify_model_file

log = logging.getLogger(__name__)

def load_llama(path: Path, n_ctx: int, n_threads: int | None = None):
    """Open a verified GGUF with llama.cpp (imported here: it is heavy and optional for fakes);
    ``n_threads`` for both decode and batch steps, else every usable core (the runtime's thread
    governor sets the count per call)."""
    import llama_cpp

    quiet_llama_logs(llama_cpp)
    threads = max(1, n_threads or usable_cores())
    try:
        return llama_cpp.Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            n_batch=512,
            flash_attn=True,  # as llama-server (its default on CPU) and the batch runner's context
            verbose=False,
        )
    except (ValueError, RuntimeError) as exc:
        raise ModelFileError(f"llama.cpp could not load {path}: {exc}") from None


def check_readable(path: Path) -> None:
    """llama.cpp opens ``path``'s header, metadata and vocabulary and checks that every tensor
    lies within the file (no weights evaluated; under a second); ``ModelInstallError`` if not."""
    import llama_cpp

    from models.install import ModelInstallError

    quiet_llama_logs(llama_cpp)
    try:
        llama_cpp.Llama(model_path=str(path), n_ctx=256, vocab_only=True, verbose=False)
    except (ValueError, RuntimeError):
        raise ModelInstallError("llama.cpp cannot read it: the file is damaged or incomplete") from None


class LlamaModel:
    """A loaded GGUF behind the LanguageModel interface."""

    def __init__(
        self, profile: ModelProfile, path: Path, *, sha256: str | None = None, n_threads: int | None = None,
        models_dir: Path | None = None, decoder: str = "fast", snapshot_bytes: int = 256 << 20,
    ):
        """``models_dir`` is where the profile's vision projector is looked for (default: the
        model file's folder)."""
        hint = (
            "Place the operator-supplied GGUF there or set APPLIANCE_MODEL_PATH."
            if profile.operator_placed
            else "Run ./build.sh (or `appliance init`) to assemble the default model."
        )
        verify_model_file(path, sha256 if sha256 is not None else profile.sha256, hint=hint)
        self.profile = profile
        self.profile_name = profile.name
        self.path = path
        self.models_dir = models_dir if models_dir is not None else path.parent
        self._lock = threading.Lock()
        self._grammars: dict[type, object] = {}
        self.last_stats: CallStats | None = None
        self._llm = load_llama(path, profile.n_ctx, n_threads)
        self.decoder = decoder
        self.last_text = ""  # raw output of the last constrained call (for tests and the bench)
        self.cache = PrefixCache(self._llm, snapshot_bytes)
        self._table: TokenTable | None = None
        self._backend = DecoderBackend(self.cache, self._llm.n_vocab())
        self._vision = None  # appliance.llm.vision.VisionRuntime, created by the first image
        self.threads = ThreadGovernor(self._set_threads, override=n_threads)
        self.cache.before_eval = self.threads.apply

    def _set_threads(self, threads: Threads) -> None:
        """llama.cpp's thread counts for the next steps (caller holds the lock)."""
        import llama_cpp

        llama_cpp.llama_set_n_threads(self._llm._ctx.ctx, threads.decode, threads.batch)
        self._llm.n_threads, self._llm.n_threads_batch = threads.decode, threads.batch
        self._llm.context_params.n_threads = threads.decode
        self._llm.context_params.n_threads_batch = threads.batch

    @property
    def table(self) -> TokenTable:
        if self._table is None:
            import llama_cpp

            self._table = TokenTable.build(llama_cpp, self._llm._model.vocab, self._llm.n_vocab())
        return self._table

    def _is_eog(self, token: int) -> bool:
        import llama_cpp

        return bool(llama_cpp.llama_vocab_is_eog(self._llm._model.vocab, token))

    # -- helpers -------------------------------------------------------------------------
    def _grammar(self, schema: type) -> object:
        cached = self._grammars.get(schema)
        if cached is None:
            from llama_cpp import LlamaGrammar

            cached = LlamaGrammar.from_string(output_schema(schema).grammar, verbose=False)
            self._grammars[schema] = cached
        return cached

    def tokenize_count(self, text: str) -> int:
        with self._lock:
            return len(self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=False))

    def count_prompt(self, messages: Sequence[Message]) -> int:
        """Tokens of the rendered prompt, as it would be evaluated (caller holds the lock)."""
        return len(self.cache.prompt_tokens(*split_parts(messages)))

    def _fit(self, node: str, messages: Sequence[Message], reserve: int) -> Fitted:
        """``messages`` fitted to the context with room for ``reserve`` generated tokens (caller
        holds the lock); a trim is logged, an impossible fit raises ``ContextOverflow``."""
        try:
            fitted = fit_messages(messages, self.count_prompt, self._llm.n_ctx() - reserve)
        except GenerationError as exc:
            log.warning("%s: prompt does not fit the %d-token context: %s", node, self._llm.n_ctx(), exc)
            raise
        if fitted.trimmed:
            log.warning("%s: prompt trimmed to %d tokens (%d earlier messages left out, %d result shortenings)",
                        node, fitted.tokens, fitted.history_dropped, fitted.results_shortened)
        return fitted

    # -- interface -----------------------------------------------------------------------
    def generate_constrained(
        self, node: str, messages: Sequence[Message], schema: type[T], *, temperature: float, max_tokens: int,
        decoder: str | None = None, cancel: threading.Event | None = None,
    ) -> T:
        # Whatever the decoder, a schema must have a safe grammar (the language both decoders
        # produce); anything else is refused here with SchemaNotSupported, before any decoding.
        output_schema(schema)
        mode = decoder or self.decoder
        if mode == "fast":
            if fast_handles(schema):
                return self._constrained_fast(node, messages, schema, temperature, max_tokens, cancel)
        if cancel is not None and cancel.is_set():
            raise GenerationCancelled(f"{node}: cancelled before it started")
        return self._constrained_grammar(node, messages, schema, temperature, max_tokens)

    def _constrained_fast(self, node, messages, schema: type[T], temperature: float, max_tokens: int,
                          cancel: threading.Event | None = None) -> T:
        derived = output_schema(schema)
        started = time.perf_counter()
        with self._lock:
            self.threads.apply()
            table = self.table
            eval_before = self.cache.eval_seconds
            fitted = self._fit(node, messages, max_tokens)
            prefill = self.cache.prime(*split_parts(fitted.messages), reserve=max_tokens)
            dec = SchemaDecoder(self._backend, table, temperature, budget=max_tokens, cancel=cancel)
            try:
                text = dec.decode(derived)
            except BudgetExceeded:
                raise GenerationTruncated(f"{node}: {schema.__name__} output hit max_tokens={max_tokens}") from None
            except Cancelled:
                raise GenerationCancelled(f"{node}: cancelled") from None
            eval_seconds = self.cache.eval_seconds - eval_before
        self.last_text = text
        generated = dec.stats.fed_tokens + dec.stats.sampled_tokens
        self.last_stats = CallStats(
            node=node, prompt_tokens=prefill.prompt_tokens, completion_tokens=generated,
            seconds=time.perf_counter() - started, finish_reason="stop",
            prefill_tokens=prefill.prefill_tokens, cache_hit=prefill.snapshot_hit, static_tokens=prefill.static_tokens,
            eval_seconds=eval_seconds, sampled_tokens=dec.stats.sampled_tokens, fallbacks=dec.stats.fallbacks,
            closed_early=dec.stats.closed_early, model_steps=dec.stats.model_steps,
            history_dropped=fitted.history_dropped, results_shortened=fitted.results_shortened,
        )
        return parse_constrained(text, schema)

    def _constrained_grammar(self, node, messages, schema: type[T], temperature: float, max_tokens: int) -> T:
        grammar = self._grammar(schema)
        started = time.perf_counter()
        with self._lock:
            self.threads.apply()
            fitted = self._fit(node, messages, max_tokens)
            # Token ids, not text: llama-cpp-python would parse special tokens in a text prompt.
            prompt = tokenize_parts(self.cache.raw_tokenize, render_parts(fitted.messages), bos=True)
            out = self._llm.create_completion(
                prompt,
                max_tokens=max_tokens,
                temperature=temperature,
                top_k=40 if temperature > 0 else 1,
                stop=list(self.profile.stop),
                grammar=grammar,
            )
        choice = out["choices"][0]
        usage = out.get("usage", {})
        self.last_stats = CallStats(
            node=node,
            prompt_tokens=usage.get("prompt_tokens", 0),
            completion_tokens=usage.get("completion_tokens", 0),
            seconds=time.perf_counter() - started,
            finish_reason=choice.get("finish_reason") or "",
            history_dropped=fitted.history_dropped, results_shortened=fitted.results_shortened,
        )
        self.last_text = choice["text"]
        if choice.get("finish_reason") == "length":
            raise GenerationTruncated(f"{node}: {schema.__name__} output hit max_tokens={max_tokens}")
        return parse_constrained(choice["text"], schema)

    # -- images (appliance.llm.vision) ----------------------------------------------------
    @property
    def vision_problem(self) -> str | None:
        """Why images cannot be analysed with this model, or None when they can."""
        if self._vision is not None and self._vision.failed:
            return self._vision.failed
        return projector_problem(self.profile, self.models_dir)

    @property
    def vision_available(self) -> bool:
        """The profile names a projector, the file is in place and is a GGUF vision projector,
        and llama.cpp has not refused it."""
        return self.vision_problem is None

    def analyze_image(self, image_path: str | Path, question: str, *,
                      cancel: threading.Event | None = None) -> vision.ImageFindings:
        """Structured findings of one PNG/JPEG, decoded by the fast decoder after the image
        prefill (T=0.3, 512 tokens). The text prefix cache starts afresh afterwards."""
        problem = self.vision_problem
        if problem is not None:
            raise vision.VisionUnavailable(f"image analysis is unavailable: {problem}")
        image = vision.read_image(image_path)
        if cancel is not None and cancel.is_set():
            raise GenerationCancelled(f"{vision.NODE}: cancelled before it started")
        started = time.perf_counter()
        with self._lock:
            self.threads.apply()
            if self._vision is None:
                self._vision = vision.VisionRuntime(self._llm, self.profile.mmproj_path(self.models_dir))
            table = self.table
            eval_before = self.cache.eval_seconds
            try:
                text, prompt_tokens, stats = self._vision.analyze(
                    self._backend, table, image, question, eval_tokens=self.cache.eval, cancel=cancel)
            except BudgetExceeded:
                raise GenerationTruncated(f"{vision.NODE}: ImageFindings output hit max_tokens={vision.MAX_TOKENS}") from None
            except Cancelled:
                raise GenerationCancelled(f"{vision.NODE}: cancelled") from None
            finally:
                # The KV cells hold image embeddings that input_ids cannot describe: the next
                # text prompt is evaluated from an empty cache (static snapshots stay valid).
                self._llm.reset()
                self._llm._ctx.kv_cache_clear()
            eval_seconds = self.cache.eval_seconds - eval_before
        self.last_text = text
        self.last_stats = CallStats(
            node=vision.NODE, prompt_tokens=prompt_tokens, completion_tokens=stats.fed_tokens + stats.sampled_tokens,
            seconds=time.perf_counter() - started, finish_reason="stop", prefill_tokens=prompt_tokens,
            eval_seconds=eval_seconds, sampled_tokens=stats.sampled_tokens, fallbacks=stats.fallbacks,
            closed_early=stats.closed_early,
        )
        return parse_constrained(text, vision.ImageFindings)

    def generate_constrained_batch(self, jobs: Sequence[BatchJob], *, parallel: int = 16,
                                   n_ctx_per_seq: int | None = None, seed: int = 0) -> list[BatchResult]:
        """Independent constrained calls decoded side by side (``appliance.llm.batch``): a
        list of ``BatchResult`` in the jobs' order, each with its text and validated value or
        its error. Every schema must have a safe grammar and be one the fast decoder handles.
        Each sequence's slot fits the longest job (prompt plus token limit) unless given."""
        for schema in {job.schema for job in jobs}:
            output_schema(schema)
            if not fast_handles(schema):
                raise SchemaNotSupported(f"{schema.__name__}: batch decoding needs a fast-decoder schema")
        with self._lock:  # tokenizing uses the llama.cpp object too
            if n_ctx_per_seq is None:
                n_ctx_per_seq = self._slot_for(jobs)
            table = self.table
            threads = self.threads.apply()  # a batch step holds several sequences: batch threads
            with BatchRunner(self._llm, table, parallel=parallel, n_ctx_per_seq=n_ctx_per_seq,
                             n_threads=threads.batch) as runner:
                runner.before_decode = lambda: self._follow_load(runner.ctx)
                return runner.run(jobs, seed=seed)

    def _follow_load(self, ctx) -> None:
        """The batch context's threads set to the policy's batch count before each of its steps
        (caller holds the lock: the runner's coordinator runs inside it)."""
        import llama_cpp

        threads = self.threads.apply()
        llama_cpp.llama_set_n_threads(ctx, threads.batch, threads.batch)

    def _slot_for(self, jobs: Sequence[BatchJob]) -> int:
        """The smallest slot (a multiple of 256 tokens, at most the model's context) that holds
        every job's whole prompt and token limit; prompts change as nodes' prompts grow."""
        def tokens(job: BatchJob) -> int:  # as the runner tokenizes it: shared prefix and rest apart
            static, dynamic = job_parts(job)
            return (len(tokenize_parts(self.cache.raw_tokenize, static, bos=True))
                    + len(tokenize_parts(self.cache.raw_tokenize, dynamic, bos=not static)))

        longest = max((tokens(job) + job.max_tokens for job in jobs), default=0)
        return min(max(1024, -(-longest // 256) * 256), self.profile.n_ctx)

    def generate_free(
        self,
        node: str,
        messages: Sequence[Message],
        *,
        temperature: float,
        max_tokens: int,
        on_token: TokenCallback | None = None,
        cancel: threading.Event | None = None,
        ignore_eog: bool = False,
    ) -> str:
        """Free text with prompt-prefix reuse, sampled as the host samples (``appliance.llm.free``)."""
        import llama_cpp

        started = time.perf_counter()
        with self._lock:
            self.threads.apply()
            table = self.table
            eval_before = self.cache.eval_seconds
            fitted = self._fit(node, messages, max_tokens)
            prefill = self.cache.prime(*split_parts(fitted.messages), reserve=max_tokens)
            seed = int(self._backend.rng.integers(1 << 32))
            with free.FreeSampler(llama_cpp, self.cache.ctx, self._backend.logits, temperature, seed) as sampler:
                out = free.decode(sampler, self._backend.feed, table.raw, self._is_eog, max_tokens,
                                  on_token=on_token, cancel=cancel, ignore_eog=ignore_eog)
            eval_seconds = self.cache.eval_seconds - eval_before
        self.last_stats = CallStats(
            node=node, prompt_tokens=prefill.prompt_tokens, completion_tokens=out.completion_tokens,
            seconds=time.perf_counter() - started, finish_reason=out.finish, prefill_tokens=prefill.prefill_tokens,
            cache_hit=prefill.snapshot_hit, eval_seconds=eval_seconds, static_tokens=prefill.static_tokens,
            sampled_tokens=out.sampled, history_dropped=fitted.history_dropped, results_shortened=fitted.results_shortened,
        )
        if out.finish == "cancelled":
            raise GenerationCancelled(f"{node}: cancelled after {len(out.pieces)} pieces")
        return "".join(out.pieces)
