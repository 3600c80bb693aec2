"""What a run trained and the work of its step (graphsweep/parse/work.py), read from real H200 logs.

The Megatron logs are the committed runs of results/examples/megatron-moe-128e-padded (the drop-and-pad twin of the
128-expert MoE: Bridge 0.6.2 printed its configuration summary at start-up) and the builtin's (no summary: its
config.yaml's settings). Where a case needs another log shape, the real log is edited as the tool named in the test
would have written it, and the test says how.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import yaml

from graphsweep.layout import RunDir
from graphsweep.parse import work
from graphsweep.parse.run import parse_run
from graphsweep.parse.run_dir import parse_run_dir
from graphsweep.vocab import EAGER, GRAPH, INGEST
from tests.support import ROOT

PADDED = ROOT / "results/examples/megatron-moe-128e-padded/runs/s4096-88b711.full_iteration.r1"
BUILTIN = ROOT / "results/examples/h200-builtin/runs"
COMPUTE_BOUND = "h4096-nh32-l4-s2048-mb4-cfca67"


def test_the_bridge_configuration_summary_is_the_configuration_the_run_ran() -> None:
    s = parse_run([PADDED / "log.txt"], arm=GRAPH, warmup=4).summary
    cfg = s.train_config
    assert s.train_config_source == work.BRIDGE_SUMMARY
    # the Megatron Core sections list non-defaults with their default; the others every field that is set
    assert cfg["values"]["model.moe_pad_expert_input_to_capacity"] == "true"
    assert cfg["defaults"]["model.moe_pad_expert_input_to_capacity"] == "false"
    assert cfg["values"]["model.moe_expert_capacity_factor"] == "1" and cfg["defaults"][
        "model.moe_expert_capacity_factor"] == "null"
    assert cfg["values"]["train.global_batch_size"] == "2" and cfg["values"]["model.normalization"] == "RMSNorm"
    assert cfg["mcore_sections"] == ["optimizer", "ddp", "model"]
    assert cfg["sections"][3:] == ["train", "validation", "scheduler", "dataset", "checkpoint", "logger", "tokenizer",
                                   "rng"]
    # an object's address differs in every process: the same object reads the same
    assert cfg["values"]["rng.seed"] == "1234" and not any("0x" in v for v in cfg["values"].values())
    assert (s.global_batch, s.seq_length, s.tokens_per_step) == (2, 4096, 8192)


def test_the_summary_is_read_under_torchruns_rank_prefix(tmp_path: Path) -> None:
    """The same log as `torchrun --tee 3` writes it: `[default0]:` before every line of rank 0."""
    tee = tmp_path / "tee.log"
    tee.write_text("".join(f"[default0]:{line}" for line in (PADDED / "log.txt").read_text().splitlines(True)))
    plain = parse_run([PADDED / "log.txt"], arm=GRAPH, warmup=4).summary
    prefixed = parse_run([tee], arm=GRAPH, warmup=4).summary
    assert prefixed.train_config == plain.train_config and prefixed.global_batch == 2


def test_megatron_lm_arguments_are_the_configuration_of_an_mlm_log(tmp_path: Path) -> None:
    """Megatron-LM prints no Bridge summary but its `arguments` block (megatron/training/arguments.py _print_args:
    `  name .... str(value)`, dots to column 48). Constructed in that format from the padded run's own values and
    put where MLM prints it (before training) in the real log, whose Bridge summary is taken out."""
    text = (PADDED / "log.txt").read_text()
    start = text.index("Configuration Summary")
    end = text.index("=" * 70, text.index("[rng]:"))
    args = {"global_batch_size": 2, "seq_length": 4096, "moe_pad_expert_input_to_capacity": True,
            "cuda_graph_impl": "full_iteration", "num_layers": 4}
    block = ["------------------------ arguments ------------------------"]
    block += sorted(f"  {k} {'.' * (48 - len(k))} {v}" for k, v in args.items())
    block += ["-------------------- end of arguments ---------------------"]
    log = tmp_path / "mlm.log"
    log.write_text(text[:start] + "\n".join(block) + "\n" + text[end + 70:])
    s = parse_run([log], arm=GRAPH, warmup=4).summary
    assert s.train_config_source == work.MLM_ARGUMENTS
    assert s.train_config["values"] == {"cuda_graph_impl": "full_iteration", "global_batch_size": "2",
                                        "moe_pad_expert_input_to_capacity": "true", "num_layers": "4",
                                        "seq_length": "4096"}
    assert (s.global_batch, s.seq_length, s.tokens_per_step) == (2, 4096, 8192)


def test_a_builtin_run_is_what_its_config_yaml_gave_it_and_what_its_lines_print() -> None:
    run = BUILTIN / f"{COMPUTE_BOUND}.attn.r1"
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    s = parse_run([run / "log.txt"], arm=GRAPH, warmup=3, given=work.given_config(cfg)).summary
    assert s.train_config_source == work.CONFIG_YAML
    assert s.train_config["values"]["micro_batch"] == "4" and s.train_config["values"]["hidden"] == "4096"
    assert (s.global_batch, s.seq_length, s.tokens_per_step) == (4, 2048, 8192)
    # without its config.yaml (`graphsweep compare` on the bare log): the global batch its lines print, nothing else
    bare = parse_run([run / "log.txt"], arm=GRAPH, warmup=3).summary
    assert (bare.train_config, bare.global_batch, bare.seq_length) == (None, 4, None)


def test_the_global_batch_is_the_one_the_steady_windows_lines_print(tmp_path: Path) -> None:
    """The compute-bound attn run (steady window 5-24) with its iteration lines edited to print `global batch size: 2`
    on iterations 1-4 (warmup and capture, as Megatron's batch-size ramp-up prints a smaller batch there), then on
    every line from 5 on: the steady window's lines decide."""
    run = BUILTIN / f"{COMPUTE_BOUND}.attn.r1"

    def halved(first: int, last: int) -> Path:
        out = []
        for line in (run / "log.txt").read_text().splitlines(True):
            m = re.search(r"\] iteration\s+(\d+)/", line)
            if m and first <= int(m.group(1)) <= last:
                line = re.sub(r"global batch size: +\d+ \|", "global batch size:     2 |", line)
            out.append(line)
        log = tmp_path / f"{first}-{last}.log"
        log.write_text("".join(out))
        return log

    s = parse_run([halved(1, 4)], arm=GRAPH, warmup=3).summary
    assert (s.steady_first, s.global_batch) == (5, 4)
    assert parse_run([halved(5, 24)], arm=GRAPH, warmup=3).summary.global_batch == 2


def test_values_read_the_same_however_they_were_written() -> None:
    assert work.canonical("True") == work.canonical(True) == "true"
    assert work.canonical("None") == work.canonical(None) == "null"
    assert work.canonical("1.0") == work.canonical(1) == work.canonical(1.0) == "1"
    assert work.canonical("'RMSNorm'") == work.canonical("RMSNorm") == "RMSNorm"
    assert work.canonical("['core_attn']") == work.canonical(["core_attn"]) == "[core_attn]"
    assert work.canonical("<megatron.core.timers.Timers object at 0x7f43ee1fdaf0>") == \
        "<megatron.core.timers.Timers object>"
    assert work.canonical("torch.bfloat16") == "torch.bfloat16"


def test_an_eager_run_without_a_log_records_nothing(tmp_path: Path) -> None:
    s = parse_run([tmp_path / "missing.log"], arm=EAGER, warmup=3).summary
    assert (s.train_config, s.train_config_source, s.global_batch, s.tokens_per_step) == (None, None, None, None)


def test_an_ingested_run_is_what_its_log_says_not_what_the_plan_would_have_run(tmp_path: Path) -> None:
    """The parse rule on a copy of the padded eager run's folder: as a job of the sweep it adds its config.yaml's
    overrides (the keys Bridge's summary does not print); ingested (run.json executor `ingest`, run/ingest.py) its
    config.yaml is the plan's command, not the user's, and only the log counts."""
    src = ROOT / "results/examples/megatron-moe-128e-padded/runs/s4096-88b711.eager.r1"
    run = tmp_path / src.name
    shutil.copytree(src, run)
    job = parse_run_dir(RunDir(run))
    assert job.train_config_source == f"{work.BRIDGE_SUMMARY} + {work.CONFIG_YAML}"
    assert job.train_config["values"]["rerun_state_machine.check_for_nan_in_loss"] == "false"
    info = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**info, "executor": INGEST}))
    ingested = parse_run_dir(RunDir(run))
    assert ingested.train_config_source == work.BRIDGE_SUMMARY
    assert "rerun_state_machine.check_for_nan_in_loss" not in ingested.train_config["values"]
