"""What every classification rule sees (Ctx) and the words it uses: where a line is, a failure's phase (the one
phase model of the parse stage: the rules, the teardown rule and the retry policy all read phase_of), the proving
line's cause.

The iteration line `i/N` is printed after iteration i finished, so the failing one is the last printed + 1. The
capture is iteration start + warmup + 1, where start is the iteration the training loop started after (0, or the
checkpoint a resumed attempt loaded: Bridge 0.6.2 train.py L434-446 captures when `step - start_iteration ==
cuda_graph_warmup_steps`), or where the capture markers say.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from graphsweep import logformat as lf
from graphsweep.records import GateDecision
from graphsweep.parse.records import Evidence, Hit, Mark, RunSummary
from graphsweep.parse.signatures import Signature
from graphsweep.vocab import CAPTURE, GRAPH, INFRA_OUTCOMES, SETUP, STEADY, TEARDOWN, WARMUP


def state_of(info: Mapping) -> str | None:
    st = info.get("state")
    return str(st).split()[0].upper() if st else None


def where(h: Hit | Mark) -> str:
    return f"{h.file}:{h.line}"


def with_enum(text: str, h: Hit | Mark) -> str:
    """A CUDA error's text with the cudaError name torch's `Search for` line gave it."""
    enum = getattr(h, "cuda_enum", None)
    return f"{text} ({enum})" if enum and enum not in text else text


def set_sig(s: RunSummary, h: Hit | Mark, sig: Signature | None = None) -> None:
    s.signature, s.signature_line, s.signature_file = with_enum(h.text, h), h.line, h.file
    if sig is not None:
        s.signature_id, s.signature_source = sig.id, sig.source


def phase_of(h: Hit, arm: str, warmup: int | None, ev: Evidence) -> tuple[str, int | None]:
    """(phase, failing iteration) of a failure line (the module docstring says how: docs/megatron-facts.md §3.1,
    §3.6). After the end-of-training marker or the run's last iteration: teardown."""
    before = h.iteration_before
    if h.after_end or (before is not None and ev.train_iters is not None and before >= ev.train_iters):
        return TEARDOWN, None
    if before is None and not h.training_started:
        if len(ev.iterations):  # e.g. a rank-0 stderr file next to the last rank's stdout: use the run's progress
            before = int(ev.iterations[-1])
        else:
            return SETUP, None
    failing = (before if before is not None else ev.start_iteration) + 1
    if h.capture_state == "capturing":
        return CAPTURE, failing
    if arm == GRAPH or h.capture_state != "none":
        cap = capture_at(warmup, ev) if warmup is not None else (h.capture_iteration or ev.capture_iteration)
        if cap is None:
            return (STEADY if h.capture_state == "captured" else WARMUP), failing
        return (WARMUP if failing < cap else CAPTURE if failing == cap else STEADY), failing
    first = ev.start_iteration + (warmup + 2 if warmup is not None else 2)
    return (WARMUP if failing < first else STEADY), failing


def after_end(ev: Evidence, m: Hit | Mark | None) -> bool:
    """The line came after the end-of-training marker of its file."""
    if isinstance(m, Hit):
        return m.after_end
    end = ev.end_marker
    return m is not None and end is not None and m.file == end.file and m.line > end.line


# --------------------------------------------------------------------------------------------------
# What every rule sees
@dataclass
class Ctx:
    """One run's evidence and the summary being decided."""

    ev: Evidence
    arm: str
    warmup: int | None
    info: dict
    state: str | None
    s: RunSummary
    min_steady: int
    hits: list[Hit]  # the signature hits that count (teardown noise after a clean end removed)
    ended: bool  # an end-of-training or data-exhausted marker
    exited_ok: bool  # the job says it exited cleanly (or, without run.json, no process said it died after the end)
    job: bool = True  # False: run.json says no job ran it (job_id null): an infrastructure end is no result
    gate: GateDecision | None = None  # the launch gate's decision run.json records (read once, by its reader)
    proof: Hit | None = None  # the hit the deciding rule chose

    def pick(self, *rules: str) -> Hit | None:
        """The proving hit among these rules' signatures: the earliest rule, a cause before a symptom, a text proven
        by its traceback frame before the same text without one; first in file order otherwise."""
        order = {r: k for k, r in enumerate(rules)}
        cand = [h for h in self.hits if h.sig.rule in order]
        return min(cand, key=lambda h: (order[h.sig.rule], h.sig.symptom, h.sig.frame is None)) if cand else None

    def at(self) -> str:
        s = self.s
        return f"{s.phase}" + (f" (iteration {s.failed_iteration})" if s.failed_iteration else "")

    def fail(self, outcome: str, error_class: str | None, h: Hit | Mark | None, reason: str,
             sig: Signature | None = None, phase: bool = True) -> RunSummary:
        s = self.s
        s.outcome, s.error_class, s.reason = outcome, error_class, reason
        if h is not None:
            set_sig(s, h, sig if sig is not None else getattr(h, "sig", None))
            if phase and isinstance(h, Hit):
                s.phase, s.failed_iteration = phase_of(h, self.arm, self.warmup, self.ev)
                self.proof = h
        s.infrastructure = outcome in INFRA_OUTCOMES
        return s


@dataclass(frozen=True)
class Rule:
    name: str  # signatures name it (Signature.rule) when they feed it
    matches: str  # the evidence it looks for
    gives: str  # outcome / error class / phase
    decide: Callable[[Ctx], RunSummary | None]


def capture_at(warmup: int | None, ev: Evidence) -> int | None:
    """The capture iteration: start + warmup + 1, or the capture markers' when the warmup is unknown."""
    return ev.start_iteration + warmup + 1 if warmup is not None else ev.capture_iteration


def phase_from_iteration(failing: int, arm: str, warmup: int | None, ev: Evidence) -> str:
    cap = capture_at(warmup, ev)
    if arm == GRAPH and cap is not None:
        return WARMUP if failing < cap else CAPTURE if failing == cap else STEADY
    first = ev.start_iteration + warmup + 2 if warmup is not None else ev.start_iteration + 2
    return WARMUP if failing < first else STEADY


def graph_running(c: Ctx, phase: str) -> bool:
    """A graph was running at that phase: a capture, or a graph arm past its capture (its graphs replay)."""
    return phase == CAPTURE or (c.arm == GRAPH and phase == STEADY)


def unexplained(c: Ctx) -> bool:
    """Bridge's `Pretrain failed on rank=N with X: ...` (before the end of training) matched no signature."""
    b = c.ev.death.bridge_failed
    return b is not None and not after_end(c.ev, b) and not any(h.file == b.file and h.line == b.line for h in c.hits)


def after(text: str, needle: str) -> str:
    """The proving line from the needle on (drops srun/rank prefixes and the exception name)."""
    i = text.find(needle)
    return text[i:].strip() if i >= 0 else text.strip()


def cause(h: Hit) -> str:
    """What failed, in the line's own words from the needle on (a CUDA error from `CUDA error: `), with its cudaError
    name."""
    cuda = lf.CUDA_ERROR.decode()
    return with_enum(after(h.text, cuda if cuda in h.text else h.sig.needle.decode()), h)

