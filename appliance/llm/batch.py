"""Many independent constrained calls decoded together: one llama.cpp batch per model step.

On a CPU one decode step of a small model costs about the same for one sequence as for
several (the weights are read once per step), so independent calls, such as the many prompts
of a validity property test or the criteria of a trial prescreen, finish several times sooner
side by side than one after another.

Invariants:
- Each call is the same ``SchemaDecoder`` walk as a single call (same output language, same
  budget handling, same validation); only where its logits come from differs.
- Calls run in worker threads that never touch llama.cpp: a worker blocks in ``logits()``
  until the coordinator has evaluated every waiting sequence's tokens in one ``llama_decode``.
- The batch context is separate from the model's main context (its own KV cells, one
  sequence per slot), so the prefix cache of single calls is never disturbed. Callers hold
  the model lock for the whole run.
- Prompts are tokenized from their parts (``prompt.tokenize_parts``): only the template's
  markers become control tokens, never marker text inside a message.
- Jobs that start the same way share that prefix's KV cells: the node's system text always,
  and a job's ``shared_prefix`` (the leading text of its user message, such as the patient note
  every criterion of one patient starts with) too. A prefix no running job uses is dropped
  before a new one is evaluated, so cells in use never exceed the slots' own budget.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from appliance.errors import GenerationError, GenerationTruncated
from appliance.llm.base import parse_constrained
from appliance.llm.fast import BudgetExceeded, SchemaDecoder
from appliance.llm.grammar import output_schema
from appliance.llm.prompt import Message, Parts, split_parts, tokenize_parts
from appliance.llm.token_table import TokenTable


@dataclass
class BatchJob:
    messages: Sequence[Message]
    schema: type
    temperature: float
    max_tokens: int
    shared_prefix: str = ""  # leading user text other jobs share (its KV cells are evaluated once)


def job_parts(job: BatchJob) -> tuple[Parts, Parts]:
    """(prefix shared with other jobs, the job's own rest): ``split_parts``'s static system
    prefix, extended by ``shared_prefix`` when the user message starts with it."""
    static, dynamic = split_parts(job.messages)
    shared = job.shared_prefix
    if static and shared and dynamic and not dynamic[0][1] and dynamic[0][0].startswith(shared):
        rest = dynamic[0][0][len(shared):]
        return static + ((shared, False),), (((rest, False),) if rest else ()) + dynamic[1:]
    return static, dynamic


@dataclass
class BatchResult:
    text: str
    value: object | None  # the validated schema instance, or None when ``error`` is set
    error: Exception | None
    sampled_tokens: int = 0
    fed_tokens: int = 0
    model_steps: int = 0  # times the model's logits decided something


class _Slot:
    """One sequence of the batch context: the backend a worker's decoder talks to."""

    def __init__(self, runner: BatchRunner, seq: int, rng_seed: int):
        self.runner = runner
        self.seq = seq
        self.rng = np.random.default_rng(rng_seed)
        self.pos = 0
        self.pending: list[int] = []
        self.waiting = False
        self.done = False
        self.logits_row: np.ndarray | None = None

    # -- the backend interface SchemaDecoder uses ----------------------------------------
    def tokenize(self, text: str) -> list[int]:
        return self.runner.tokenize(text)

    def feed(self, tokens) -> None:
        self.pending.extend(int(t) for t in tokens)

    def logits(self) -> np.ndarray:
        cond = self.runner.cond
        with cond:
            self.logits_row = None
            self.waiting = True
            cond.notify_all()
            cond.wait_for(lambda: self.logits_row is not None or self.runner.failed is not None)
            if self.runner.failed is not None:
                raise GenerationError(f"batch decoding failed: {self.runner.failed}")
            return self.logits_row


class BatchRunner:
    """Decodes ``BatchJob``s ``parallel`` at a time in a context of its own."""

    def __init__(self, llm, table: TokenTable, *, parallel: int = 16, n_ctx_per_seq: int = 1024,
                 n_threads: int | None = None):
        import llama_cpp

        self.lib = llama_cpp
        self.llm = llm
        self.table = table
        self.parallel = parallel
        self.n_vocab = llm.n_vocab()
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = parallel * n_ctx_per_seq
        params.n_batch = params.n_ubatch = 512
        params.n_seq_max = 2 * parallel  # a slot's sequence, and at most one prefix per slot
        params.n_threads = params.n_threads_batch = n_threads or llm.context_params.n_threads
        params.swa_full = True  # sequences are removed and refilled: keep every cell addressable
        params.kv_unified = True  # one buffer: sequences share the cells of a common system prefix
        self.n_ctx_per_seq = n_ctx_per_seq
        self.ctx = llama_cpp.llama_init_from_model(llm._model.model, params)
        if not self.ctx:
            raise GenerationError("llama.cpp could not create the batch context")
        self.batch = llama_cpp.llama_batch_init(params.n_batch, 0, 1)
        self.n_batch = params.n_batch
        self.cond = threading.Condition()
        self._prefixes: dict[Parts, tuple[int, int]] = {}  # shared prefix -> (prefix seq, tokens)
        self._uses: dict[int, Parts] = {}  # slot seq -> the prefix its cells were copied from
        self.failed: str | None = None
        self._tok_lock = threading.Lock()
        self.before_decode = None  # called before every llama_decode (the runtime's thread policy)

    def close(self) -> None:
        if self.ctx:
            self.lib.llama_batch_free(self.batch)
            self.lib.llama_free(self.ctx)
            self.ctx = None

    def __enter__(self) -> BatchRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def tokenize(self, text: str, *, bos: bool = False, special: bool = False) -> list[int]:
        with self._tok_lock:
            return self.llm.tokenize(text.encode("utf-8"), add_bos=bos, special=special)

    def tokenize_parts(self, parts: Parts, *, bos: bool) -> list[int]:
        return tokenize_parts(lambda text, b, special: self.tokenize(text, bos=b, special=special), parts, bos=bos)

    # -- the coordinator -----------------------------------------------------------------
    def run(self, jobs: Sequence[BatchJob], seed: int = 0) -> list[BatchResult]:
        results: list[BatchResult | None] = [None] * len(jobs)
        queue = list(range(len(jobs)))[::-1]
        active: dict[int, tuple[_Slot, threading.Thread | None]] = {}
        mem = self.lib.llama_get_memory(self.ctx)
        self.lib.llama_memory_clear(mem, True)
        self._prefixes.clear()
        self._uses.clear()
        self.failed = None

        def start(seq: int) -> None:
            index = queue.pop()
            job = jobs[index]
            slot = _Slot(self, seq, seed + index)
            static, dynamic = job_parts(job)
            prompt = self.tokenize_parts(dynamic, bos=not static)  # no static part: the whole prompt
            if static:  # the slot shares the prefix's KV cells instead of evaluating them again
                prefix_seq, n_static = self._prefix(static, mem)
                self.lib.llama_memory_seq_cp(mem, prefix_seq, seq, -1, -1)
                self._uses[seq] = static
                slot.pos = n_static
            if slot.pos + len(prompt) + job.max_tokens > self.n_ctx_per_seq:
                results[index] = BatchResult("", None, GenerationError(
                    f"a prompt of {slot.pos + len(prompt)} tokens and up to {job.max_tokens} generated tokens do not fit "
                    f"a {self.n_ctx_per_seq}-token batch slot"))
                slot.done = True
                active[seq] = (slot, None)
                return
            slot.feed(prompt)
            thread = threading.Thread(target=self._work, args=(slot, job, results, index), daemon=True)
            active[seq] = (slot, thread)
            thread.start()

        for seq in range(min(self.parallel, len(jobs))):
            start(seq)
        while active:
            with self.cond:
                self.cond.wait_for(lambda: all(s.waiting or s.done for s, _ in active.values()))
            for seq in [q for q, (s, _) in active.items() if s.done]:
                thread = active.pop(seq)[1]
                if thread is not None:
                    thread.join()
                self.lib.llama_memory_seq_rm(mem, seq, -1, -1)
                self._uses.pop(seq, None)
                if queue:
                    start(seq)
            waiting = [s for s, _ in active.values() if s.waiting and not s.done]
            if not waiting:
                continue
            try:
                rows = self._decode(waiting)
            except GenerationError as exc:
                with self.cond:
                    self.failed = str(exc)
                    self.cond.notify_all()
                for _, thread in active.values():
                    if thread is not None:
                        thread.join()
                raise
            with self.cond:
                for slot in waiting:
                    slot.waiting = False
                    slot.logits_row = rows[slot.seq]
                self.cond.notify_all()
        return results  # type: ignore[return-value]

    def _prefix(self, static: Parts, mem) -> tuple[int, int]:
        """The sequence holding ``static``'s KV cells, evaluated on first use. Before a new
        prefix is evaluated, every prefix no running slot uses is dropped, so a prefix's cells are
        only ever held for slots whose budget counts them."""
        hit = self._prefixes.get(static)
        if hit is None:
            in_use = set(self._uses.values())
            for key in [k for k in self._prefixes if k not in in_use]:
                self.lib.llama_memory_seq_rm(mem, self._prefixes.pop(key)[0], -1, -1)
            taken = {q for q, _ in self._prefixes.values()}
            free = next(self.parallel + k for k in range(self.parallel) if self.parallel + k not in taken)
            tokens = self.tokenize_parts(static, bos=True)
            holder = _Slot(self, free, 0)
            holder.feed(tokens)
            self._decode([holder], logits=False)
            hit = (free, len(tokens))
            self._prefixes[static] = hit
        return hit

    def _work(self, slot: _Slot, job: BatchJob, results: list, index: int) -> None:
        dec = SchemaDecoder(slot, self.table, job.temperature, budget=job.max_tokens)
        try:
            text = dec.decode(output_schema(job.schema))
            value, error = parse_constrained(text, job.schema), None
        except BudgetExceeded:
            text, value = "".join(dec.out), None
            error = GenerationTruncated(f"{job.schema.__name__} output hit max_tokens={job.max_tokens}")
        except Exception as exc:  # noqa: BLE001 - reported per job, never lost
            text, value, error = "".join(dec.out), None, exc
        # the prompt was fed before the decoder started, so its counters hold the output only
        results[index] = BatchResult(text, value, error, dec.stats.sampled_tokens, dec.stats.fed_tokens,
                                     dec.stats.model_steps)
        with self.cond:
            slot.done = True
            self.cond.notify_all()

    def _decode(self, slots: list[_Slot], logits: bool = True) -> dict[int, np.ndarray]:
        """Evaluate every slot's pending tokens; return each slot's logits for its last one."""
        entries = []  # (token, pos, seq, wants logits)
        for slot in slots:
            n = len(slot.pending)
            for i, token in enumerate(slot.pending):
                entries.append((token, slot.pos + i, slot.seq, logits and i == n - 1))
            slot.pos += n
            slot.pending = []
        rows: dict[int, np.ndarray] = {}
        b = self.batch
        several = len(entries) > self.n_batch  # a later chunk's decode overwrites earlier rows
        for start in range(0, len(entries), self.n_batch):
            chunk = entries[start:start + self.n_batch]
            b.n_tokens = len(chunk)
            for i, (token, pos, seq, wants) in enumerate(chunk):
                b.token[i] = token
                b.pos[i] = pos
                b.n_seq_id[i] = 1
                b.seq_id[i][0] = seq
                b.logits[i] = wants
            if self.before_decode is not None:
                self.before_decode()
            if self.lib.llama_decode(self.ctx, b) != 0:
                raise GenerationError("llama_decode failed in the batch context (out of KV cells?)")
            for i, (_, _, seq, wants) in enumerate(chunk):
                if wants:
                    ptr = self.lib.llama_get_logits_ith(self.ctx, i)
                    row = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))
                    # a single chunk's rows stay valid until the next decode, which waits for
                    # every worker to be done with its row
                    rows[seq] = row.copy() if several else row
        return rows
