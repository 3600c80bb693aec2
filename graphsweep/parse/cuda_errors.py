"""A CUDA error's cause: torch's `CUDA error: <text>` line paired with the `Search for `<cudaError name>'` after it.

torch 2.11 raises every CUDA error as (c10/cuda/CUDAException.cpp c10_cuda_check_implementation, CUDAMiscFunctions.cpp
get_cuda_error_help)::

    torch.AcceleratorError: CUDA error: operation not permitted when stream is capturing
    Search for `cudaErrorStreamCaptureUnsupported' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.
    CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
    For debugging consider passing CUDA_LAUNCH_BLOCKING=1
    Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.

(tests/fixtures/logs/h200-probe/capture-error-sync.log). The error line proves the failure; the enum names its cause,
so the summary's signature is the error text with its enum, and a text the catalogue does not know (a driver's
wording, a paraphrase) still gets its enum's class (signatures.BY_ENUM). The lines after it are boilerplate.
"""

from __future__ import annotations

from graphsweep.parse import signatures as sg
from graphsweep.parse.records import Hit

# torch prints the help line right after the error line; ranks interleaving can push it a few lines down
_WITHIN = 3


def attach(enum: str, lineno: int, error_line: tuple[int, list[Hit]] | None, hits: list[Hit],
           hit_ids: set[str]) -> sg.Signature | None:
    """Give `enum` to the hits of the CUDA error line just before (or on) `lineno`; a generic `CUDA error: ` hit there
    becomes the signature the enum proves. Returns that signature when no error line precedes the enum (the caller
    records the enum's own line as the proof), else None. `hits` / `hit_ids`: the file's, updated in place."""
    near = error_line is not None and 0 <= lineno - error_line[0] <= _WITHIN
    on_line = error_line[1] if near and error_line else []
    for h in on_line:
        h.cuda_enum = h.cuda_enum or enum
    target = sg.BY_ENUM.get(enum)
    if target is None or any(h.sig is target or h.sig.cuda_enum == enum for h in on_line):
        return None
    generic = next((h for h in on_line if h.sig.fallback), None)
    if generic is not None:
        hit_ids.discard(generic.sig.id)
        if target.id in hit_ids:  # an earlier line of the file proved it already
            hits.remove(generic)
            on_line.remove(generic)
        else:
            generic.sig = target
            hit_ids.add(target.id)
        return None
    if near or target.id in hit_ids:
        return None
    hit_ids.add(target.id)
    return target
