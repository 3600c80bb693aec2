"""Before any GPU second: every cell's exact command through the Megatron entry's override handling and Bridge's
own config validation (runtime_config_update), in a Python that has Megatron Bridge (no GPU needed).

    PYTHONPATH=. python tools/check_bridge_argv.py SPEC      (run by the Bridge Python; graphsweep's controller
                                                             packages must be importable there too)

Prints OK or FAIL (with Bridge's traceback) per cell, repeat 1 only; exit 1 when any cell fails.
"""

from __future__ import annotations

import os
import sys
import traceback

os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")

from graphsweep.entry import megatron_entry as me  # noqa: E402
from graphsweep.sweepspec.load import load_spec  # noqa: E402
from graphsweep.workloads.registry import launch_plan  # noqa: E402


def main(spec_path: str) -> int:
    failed = 0
    for run in load_spec(spec_path).runs():
        if run.repeat != 1:
            continue
        plan = launch_plan(run)
        # a pair job (pairing: true) runs its arms' own commands one after the other: check each arm's
        for label, arm in plan.arms.items() if plan.arms else [("", plan)]:
            failed += check_argv(f"{run.run_id}.{label}" if label else run.run_id, arm.argv)
    return 1 if failed else 0


def check_argv(run_id: str, argv: list[str]) -> int:
    """0 when Bridge accepts the command's config, 1 when it refuses it (its traceback printed)."""
    from megatron.bridge.training.config import runtime_config_update

    i = next(k for k, a in enumerate(argv) if a.endswith("megatron_entry.py"))
    args, overrides = me.parse_args(argv[i + 1:])
    if args.graph_api == "auto":
        overrides = me.translate_graph_overrides(overrides, me.detect_has_modules())
    try:
        cfg = me.build_config(args.recipe, overrides)
        runtime_config_update(cfg)
    except Exception:  # noqa: BLE001 - every cell is checked, each failure shown
        print("FAIL", run_id, flush=True)
        traceback.print_exc()
        return 1
    m = cfg.model
    print("OK", run_id, "impl", m.cuda_graph_impl, "modules", getattr(m, "cuda_graph_modules", None),
          "experts", m.num_moe_experts, "seq", m.seq_length, "vocab", cfg.tokenizer.vocab_size, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
