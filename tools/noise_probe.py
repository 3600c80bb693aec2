"""What makes a launch-bound step time wander, inside ONE training process (device side): Python's garbage collector
and CPU affinity, switched block by block in a 2 x 2 rotation, so that every condition sees the same warm model and
the same slow drifts of the machine, and no condition pays a process start.

    GRAPHSWEEP_PIN_CPUS=1 python tools/noise_probe.py --block 8 --recipe vanilla_gpt_pretrain_config KEY=VALUE ...

It runs graphsweep's Megatron entry (graphsweep/entry/megatron_entry.py, the command of a sweep's eager run) with one
change: from the first iteration on, each block of --block iterations runs under the next of (gc on, not pinned),
(gc off, pinned), (gc off, not pinned), (gc on, pinned), and the block's first iteration prints
`[noise-probe] block B from iteration I: gc on|off, pinned|not pinned`. "gc off" is what train.manual_gc does
(gc.disable after one collection); "pinned" is spec quiet.pin_cpus (graphsweep/entry/affinity.py). Give the command
no train.manual_gc override: the probe switches the collector itself. tools/noise_report.py reads the logs.
"""

from __future__ import annotations

import gc
import os
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graphsweep.entry import affinity, megatron_entry  # noqa: E402

CONDITIONS = ((True, False), (False, True), (False, False), (True, True))  # (gc on, pinned), rotated by block
BLOCK = 8


def main() -> int:
    argv = sys.argv[1:]
    global BLOCK
    if argv[:1] == ["--block"]:
        BLOCK, argv = int(argv[1]), argv[2:]
    allowed = set(os.sched_getaffinity(0))
    original = megatron_entry.make_callback

    def make_callback(warmup, graph_arm, pinning=None):
        callback = original(warmup, graph_arm, pinning)
        start = callback.on_train_step_start

        def on_train_step_start(self, context):
            start(context)
            i = int(context.state.train_state.step) + 1
            if (i - 1) % BLOCK == 0:
                gc_on, pinned = CONDITIONS[((i - 1) // BLOCK) % len(CONDITIONS)]
                if gc_on:
                    gc.enable()
                else:
                    gc.collect()
                    gc.disable()
                if pinned and pinning is not None:
                    affinity.settle(pinning)
                else:
                    affinity.release(allowed)
                print(f"[noise-probe] block {(i - 1) // BLOCK + 1} from iteration {i}: gc {'on' if gc_on else 'off'}, "
                      f"{'pinned' if pinned and pinning is not None else 'not pinned'}", flush=True)

        # bound, as Bridge's CallbackManager.add reads the method's __func__ (training/callbacks.py)
        callback.on_train_step_start = types.MethodType(on_train_step_start, callback)
        return callback

    megatron_entry.make_callback = make_callback
    return megatron_entry.main(argv)


if __name__ == "__main__":
    megatron_entry.exit_now(main())
