"""A verdict's colour, the same in every report, plot and screenshot test (the verdicts are graphsweep/vocab.py's)."""

from __future__ import annotations

from graphsweep.vocab import (
    BASELINE_FAILED, BLOCKED, FAILED, INCONCLUSIVE, INVALID, NEUTRAL, NOT_COMPARABLE, OOM, SLOWDOWN, SPEEDUP, UNVERIFIED,
)  # fmt: skip

# speedup green, slowdown red, neutral grey, inconclusive amber, the rest purple / dark
VERDICT_COLORS = {
    SPEEDUP: "#1a7f37", SLOWDOWN: "#cf222e", NEUTRAL: "#6e7781", INCONCLUSIVE: "#b08800", UNVERIFIED: "#7d4e00",
    BLOCKED: "#8250df",
    OOM: "#5b2bb5", INVALID: "#953800", FAILED: "#24292f", BASELINE_FAILED: "#424a53", NOT_COMPARABLE: "#57606a",
}  # fmt: skip
