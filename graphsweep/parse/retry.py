"""The retry policy (docs/failures.md): which failures earn the one automatic retry, and what the reason says of it.

A crashed run is retried once only when every cause its log shows is transient for its arm (`transient_of`): node
and network faults in any arm, NCCL collective timeouts while no graph runs (not during a capture, nor in a graph arm
replaying its graphs: NCCL's captured collectives can deadlock at replay, a hang the rerun repeats), and the CUDA
kernel faults NVIDIA's perf harness retries only in an eager arm (in a graph arm the graph is the suspect). The
classifier (graphsweep/parse/classify.py) applies it to the parsed evidence, and the run rule takes the classifier's
answer (graphsweep/parse/read.py find_transient, asked from the run rule's small process by parse/ask.py): one
reader, one phase model.
"""

from __future__ import annotations

from typing import Iterable

from graphsweep.parse.records import RunSummary
from graphsweep.parse.signatures import EAGER_ARMS, ORDER, RETRY_ANY, RETRY_EAGER, RETRY_NO_GRAPH, RUNTIME, Signature
from graphsweep.vocab import COMPLETED


def retries(sig: Signature, arm: str | None, graph_running: bool) -> bool:
    """This signature alone earns the one automatic retry, in this arm (None: unknown, read as a graph arm).
    `graph_running`: a capture was running, or a graph arm had reached its capture iteration (its graphs replay)."""
    if sig.retry == RETRY_ANY:
        return True
    if sig.retry == RETRY_NO_GRAPH:
        return not graph_running
    return sig.retry == RETRY_EAGER and arm in EAGER_ARMS


def transient_of(seen: Iterable[tuple[Signature, bool]], arm: str | None, *,
                 unexplained: bool = False) -> Signature | None:
    """The transient signature that earns the retry, or None. `seen`: (signature, printed while a graph ran: see
    `retries`) of the failure's lines (not those of its teardown: a failure after the end of training keeps its
    measurement). None when any cause shows that is not transient for this arm (a config or capture error, an OOM, a
    CUDA error in a graph arm, a walltime, a segfault, a NaN) or when Bridge's `Pretrain failed ... with X` names an
    exception no signature explains (`unexplained`): a rerun would fail the same way."""
    found = list(seen)
    if unexplained or any(not s.neutral and not retries(s, arm, cap) for s, cap in found):
        return None
    cand = [s for s, cap in found if retries(s, arm, cap)]
    return min(cand, key=lambda s: (s.symptom, ORDER[s])) if cand else None


def retry_note(s: RunSummary) -> None:
    """What the retry policy did with this run, appended to its reason: one retry applies, it was retried once, or it
    failed the same way twice (both attempts' proving lines)."""
    prev = [p for p in s.previous_attempts if p.get("signature")]
    if not prev:
        if s.transient and s.outcome != COMPLETED:
            s.reason += f" [transient signature '{s.transient}': one automatic retry applies (docs/failures.md)]"
        return
    p = prev[-1]
    where = f" at {p['file']}:{p['line']}" if p.get("line") else f" ({p.get('log')})"
    if s.outcome == COMPLETED:
        s.reason += f" [retried once after transient '{p['signature']}'{where}]"
    elif s.transient and s.transient == p["signature"]:
        s.reason += f" [failed the same way twice: attempt 1 '{p['signature']}'{where}; attempt 2 " \
                    f"{s.signature_file}:{s.signature_line}]"
    else:
        s.reason += f" [previous attempt failed with transient '{p['signature']}'{where}]"


def retry_table() -> str:
    """The retry policy's list as the Markdown table docs/failures.md shows: every signature that can earn a retry."""
    rows = ["| text | rule | error class | retried | source |", "|---|---|---|---|---|"]
    rows += [f"| `{s.needle.decode()}` | `{s.rule}` | {s.error_class} | {s.retry}"
             + (" (a symptom: used when no cause shows)" if s.symptom else "") + f" | {s.source} |"
             for s in RUNTIME if s.retry]
    return "\n".join(rows)
