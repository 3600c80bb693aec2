"""Where an eager step's host time goes (graphsweep/entry/host_time.py): the attribution rule on hand-made
intervals, the line's grammar, and one real torch.profiler window in which a backward pass is charged to the
region whose forward made it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from graphsweep import logformat as lf
from graphsweep.entry import host_time
from tests.support import ROOT


def test_time_goes_to_the_innermost_open_region() -> None:
    # a layer (0-100) with attention 10-40 inside it, and a backward node of attention on its own thread later
    got = host_time.exclusive_ns([(0, 100, "moe_other"), (10, 40, "attn"), (60, 70, "experts")])
    assert got == {"moe_other": 60, "attn": 30, "experts": 10}
    assert host_time.exclusive_ns([]) == {}
    # an interval that outlives its parent is cut at the parent's end: no time is counted twice
    assert host_time.exclusive_ns([(0, 10, "mlp"), (5, 20, "attn")]) == {"mlp": 5, "attn": 5}


def test_outside_is_the_rest_of_the_step_and_never_negative() -> None:
    RT = host_time.RegionTime
    got = host_time.per_iteration({"attn": RT(40_000_000, 2_000_000, 300), "experts": RT(20_000_000, 0, 100),
                                   "outside": RT(0, 4_000_000, 50)}, wall_ns=200_000_000, iterations=2)
    assert got["attn"] == (20.0, 1.0, 150) and got["experts"] == (10.0, 0.0, 50)
    assert got["outside"] == (70.0, 2.0, 25)  # the wall time no region holds, with its own waits and events
    assert list(got) == list(host_time.REGIONS)
    assert host_time.per_iteration({"attn": RT(300)}, wall_ns=100, iterations=1)["outside"][0] == 0.0


def test_the_engine_gap_before_a_backward_node_is_that_nodes() -> None:
    nodes = [(100, 200, "attn"), (250, 300, "experts"), (10_000_000, 10_000_100, "attn"), (260, 270, "attn")]
    spans = host_time._backward_spans(nodes)
    assert (200, 300, "experts") in spans  # 50 ns gap: the engine readying the experts' node
    assert (10_000_000, 10_000_100, "attn") in spans  # a 10 ms gap is something else: not charged
    assert (260, 270, "attn") in spans  # a nested node stays as it is


def test_each_scope_covers_what_its_graph_replays() -> None:
    assert host_time.covered_regions(["attn", "moe_router", "moe_preprocess"]) == ("attn", "moe_router", "moe_preprocess")
    assert host_time.covered_regions(["moe_router", "moe_preprocess"]) == ("moe_router", "moe_preprocess")
    # the dispatch, the experts and the MoE tail stay eager unless the whole MoE layer (drop-and-pad only) is captured
    assert "experts" in host_time.covered_regions(["moe"]) and "experts" not in host_time.covered_regions(["attn"])
    assert host_time.covered_regions(["full_iteration"]) == host_time.REGIONS
    assert host_time.covered_regions(["no_such_scope"]) == ()


def test_the_line_round_trips_through_the_parsers_pattern() -> None:
    line = lf.host_time(0, 2, 4, 240.1119, {"attn": (40.2, 0.5, 1520.4), "outside": (110.0, 3.25, 2210)})
    assert line == ("[graphsweep] host time: rank 0 iterations 2-4: 240.112 ms per iteration: "
                    "attn 40.200 (wait 0.500, 1520 events), outside 110.000 (wait 3.250, 2210 events)")
    m = lf.RE_HOST_TIME.search(b"[default0]:" + line.encode())
    assert m is not None and m.group(1, 2, 3, 4) == (b"0", b"2", b"4", b"240.112")
    assert lf.RE_HOST_REGION.findall(m.group(5)) == [(b"attn", b"40.200", b"0.500", b"1520"),
                                                     (b"outside", b"110.000", b"3.250", b"2210")]
    miss = lf.host_time_unmeasured(1, "RuntimeError: no Megatron Core TransformerLayer")
    assert lf.RE_HOST_TIME.search(miss.encode()) is None
    assert lf.RE_HOST_TIME_UNMEASURED.search(miss.encode()).group(2).startswith(b"RuntimeError")


def test_the_first_h200_logs_line_without_waits_still_reads() -> None:
    log = ROOT / "benchmarks/data/h200-moe-128e-sweep-a/runs/s4096-f2da0d.eager.r1/log.txt"
    m = lf.RE_HOST_TIME.search(log.read_bytes())
    assert m is not None and m.group(4) == b"755.750"
    regions = {k.decode(): (float(ms), wait) for k, ms, wait, _ in lf.RE_HOST_REGION.findall(m.group(5))}
    assert list(regions) == list(host_time.REGIONS)
    assert regions["experts"] == (416.53, b"")  # no wait/events figures in that line


def test_megatron_annotation_refuses_a_model_it_cannot_read() -> None:
    class NotALayer:
        def modules(self):  # a chunk of modules none of which is a Megatron Core layer
            return [object()]

    with pytest.raises(RuntimeError, match="another Core version"):
        host_time.annotate_megatron([NotALayer()], optimizer=None)


PROBE = textwrap.dedent('''
    import time, torch
    from torch import nn
    from graphsweep.entry import host_time
    from graphsweep.entry.gpu_busy import BusyProbe
    torch.set_num_threads(1)

    class SlowBackward(torch.autograd.Function):  # the backward of attention takes 30 ms of host time
        @staticmethod
        def forward(ctx, x):
            return x * 1.0
        @staticmethod
        def backward(ctx, g):
            time.sleep(0.03)
            return g

    class Attn(nn.Module):
        def __init__(self):
            super().__init__(); self.l = nn.Linear(32, 32)
        def forward(self, x):
            return SlowBackward.apply(self.l(x))

    class Block(nn.Module):
        def __init__(self):
            super().__init__(); self.attn = Attn(); self.mlp = nn.Linear(32, 32)
        def forward(self, x):
            x = x + self.attn(x)
            return x + self.mlp(x)

    model = nn.Sequential(Block(), Block())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    probe = BusyProbe(0, 4, enabled=True, cuda=False, annotate=lambda: host_time.annotate_modules(
        [(getattr(b, n), n) for b in model for n in ("attn", "mlp")], opt))
    for i in range(1, 7):
        probe.before(i)
        model(torch.randn(4, 32)).sum().backward(); opt.step(); opt.zero_grad()
        for line in probe.after(i):
            print(line)
    print("restored", "forward" not in vars(model[0].attn), "step" not in vars(opt))
''')


@pytest.mark.torch
def test_a_backward_pass_is_charged_to_the_region_whose_forward_made_it() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, check=True).stdout
    m = lf.RE_HOST_TIME.search(out.encode())
    assert m is not None, out
    assert m.group(2, 3) == (b"2", b"4")
    ms = {k.decode(): float(v) for k, v, _, _ in lf.RE_HOST_REGION.findall(m.group(5))}
    # two layers' attention backward sleep 30 ms each per iteration; nothing else sleeps
    assert ms["attn"] >= 0.9 * 60 and ms["attn"] > 5 * ms["mlp"], ms
    assert ms["optimizer"] > 0 and ms["experts"] == 0.0
    assert sum(ms.values()) == pytest.approx(float(m.group(4)), abs=0.01 * len(ms))
    assert "restored True True" in out  # the annotations are gone after the window
