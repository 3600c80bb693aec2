"""The retry policy's words on a run's attempts (classify.py applies the policy; signatures.transient_of says what
is transient): the run rule retries a transient crash once, and the reason of every attempt says so."""

from __future__ import annotations

from graphsweep.parse.records import RunSummary
from graphsweep.vocab import COMPLETED


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
