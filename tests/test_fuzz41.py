"""Hostile input, round 41 (fuzz41): plan's search-space limit, the Megatron-LM flags read since, and what this
round's corpus (scripts/fuzz41.py) found. The CLI contract is test_hostile_inputs.py's: exit 2, one ``error:`` line
naming the option / file / field, what was wrong and what is allowed, nothing on stdout, no input changed.

1. ``plan -m mixtral-8x7b -n 64 --allow all`` searched 14.2e9 candidates for 51 s of CPU with nothing said before it
   finished and no limit (fuzz40's open finding). The space is counted before pass 1a prices anything (planner.search:
   outer candidates x data-parallel communication choices); one over ``--max-candidates`` (planner.MAX_CANDIDATES,
   1e10; inf: no limit) is refused there with its size, both factors, the --allow searches given, the axes to pin
   and the option that raises the limit (planner.check_space; docs/model.md#plan-space).
2. Four Megatron-LM flags were warned "not used" without why (NVIDIA/Megatron-LM@d98e8a64dd; specs.megatron_args):
   --moe-expert-capacity-factor C with --moe-pad-expert-input-to-capacity is now read as training.moe_pad_to_capacity
   at moe_rank_imbalance C (the drop-and-pad dispatch the model prices); either alone, a factor under 1 and a negative
   one say why they are not priced, and the forms Megatron-Core refuses are refused. --delay-wgrad-compute is read
   with --overlap-moe-expert-parallel-comm (strategy moe_a2a_overlap prices the pair) and refused alone (Megatron-Core
   asserts the overlap beside it). --num-distributed-optimizer-instances N > 1 says it is priced as sync hier:G:1 at
   zero 1 with G = dp / N, a sync the launch cannot give (dp is the command's); 0 is refused, 1 is the default.
3. The corpus (scripts/fuzz41.py, 1,032 cases) found no traceback, hang, invalid JSON, non-finite number or changed
   input; it found the limit's cost as first said too low (plan --allow all at 5.0e9 took 24 s of CPU, 4.7 ns a
   candidate against the 0.5-3 ns the help said: the measured range is said now; a default of 2e9 was tried and
   refused tests/test_speed37.py's 5.34e9 search, so it stays 1e10), and that fuzz40's outs runner
   never reached sweep's outputs (its sweep named a strategy file, which a sweep refuses); run again with an inline
   strategy, every --out set with one output refused wrote nothing (the test below, in process).
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pytest
from test_hostile_inputs import no_hang, refused  # noqa: F401 (no_hang: autouse)

from scalemodel.engine import planner
from scalemodel.engine.job import build_job
from scalemodel.errors import InputError
from scalemodel.specs import TrainingSpec, load_cluster, load_workload, notices
from scalemodel.specs.frameworks import read_strategy_file

MIXTRAL_ALL = ["plan", "-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", "64", "--allow", "all"]


def test_the_mixtral_allow_all_space_is_refused_before_it_is_searched(cli) -> None:
    """fuzz40's 51 s search: refused in well under a second of CPU, with its size (16,693,992 outer candidates x 1,064
    communication choices, the figures the search reports in --json when it runs: docs/model.md#plan-space), the
    limit, what narrows it and the option that raises it."""
    c0 = time.process_time()
    line = refused(cli, *MIXTRAL_ALL, "--json")
    assert time.process_time() - c0 < 5
    assert line.startswith("error: --max-candidates: the search space is 17,762,407,488 candidates"), line
    assert f"{16_693_992:,} outer candidates" in line and f"{1_064:,} data-parallel communication" in line
    assert "limit of 10,000,000,000" in line
    for named in ("fewer --allow searches (given: all;", "--constraint tp=", "--set strategy.X",
                  "--max-candidates 17762407488 (or inf)"):
        assert named in line, line


@pytest.mark.parametrize("value", ["nan", "0", "-1", "-inf", "1e-3"])
def test_a_limit_no_search_can_meet_is_refused(cli, value: str) -> None:
    refused(cli, "plan", "-m", "gpt-1.7b", "-n", "8", "--max-candidates", value, match="error: --max-candidates:")


def test_a_limit_that_is_no_number_is_a_usage_error(cli) -> None:
    r = cli("plan", "-m", "gpt-1.7b", "-n", "8", "--max-candidates", "lots")
    assert r.code == 2 and "'lots' is not a number" in r.err and r.out == "", r.err


@pytest.fixture(scope="module")
def small_job():  # type: ignore[no-untyped-def]
    cl, wl = load_cluster("dgx-a100", []), load_workload("gpt-1.7b", [])
    return build_job(cl, wl, TrainingSpec(global_batch=32, seq_len=2048))


def test_the_limit_is_the_space_the_search_counts(small_job) -> None:  # type: ignore[no-untyped-def]
    """At the limit the search runs, and reports the space it was held to; one candidate fewer is refused before
    anything is priced. The space bounds what the search covers (covered <= outer x choices: the outer candidates
    no sync mode admits are counted in the space, not covered), so a limit of covered - 1 is refused too."""
    res = planner.search(small_job, 16, 32, top=1, sync_modes=("bsp", "local:4"), max_candidates=math.inf)
    space = res.search["outer_candidates"] * res.search["communication_choices"]
    assert 0 < res.search["covered"] <= space
    again = planner.search(small_job, 16, 32, top=1, sync_modes=("bsp", "local:4"), max_candidates=space)
    assert again.search["covered"] == res.search["covered"]
    for limit in (space - 1, res.search["covered"] - 1):
        with pytest.raises(InputError, match=f"the search space is {space:,} candidates at global batch 32") as exc:
            planner.search(small_job, 16, 32, top=1, sync_modes=("bsp", "local:4"), max_candidates=limit)
        assert exc.value.where == "--max-candidates" and "over 2 sync modes" in exc.value.what
        assert "fewer --sync-modes" in exc.value.allowed and "--allow" not in exc.value.allowed


def test_each_batch_of_a_time_to_train_search_is_held_to_the_limit(cli) -> None:  # type: ignore[no-untyped-def]
    """time-to-train without --global-batch searches 1/8 to 8 x the batch, each a search of its own, the largest
    batch (most micro-batches) first: a limit under its space is refused before any batch is searched, naming the
    batch (8 x 8 GPUs = 64)."""
    one = cli("plan", "-m", "gpt-1.7b", "-c", "dgx-a100", "-n", "8", "--global-batch", "64", "--top", "1", "--json")
    search = json.loads(one.out)["search"]
    space = search["outer_candidates"] * search["communication_choices"]
    c0 = time.process_time()
    line = refused(cli, "plan", "-m", "gpt-1.7b", "-c", "dgx-a100", "-n", "8", "--objective", "time-to-train",
                   "--train-tokens", "1e9", "--max-candidates", str(space - 1))
    assert time.process_time() - c0 < 0.5 * 7  # refused at the first search, not after six
    assert f"the search space is {space:,} candidates at global batch 64" in line, line


# --- 2. the Megatron-LM flags ---------------------------------------------------------------------------------------
MOE = ["-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", "64"]
#: tp 2 with sequence parallelism (Megatron-Core refuses MoE at tp > 1 without it), ep 8, the alltoall dispatcher
LAUNCH = ("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --sequence-parallel --micro-batch-size 1 --bf16 "
          "--expert-model-parallel-size 8 ")
ALLTOALL = "--moe-token-dispatcher-type alltoall "


def _read(tmp_path, flags: str):  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text(LAUNCH + flags + "\n")
    with notices.collecting():
        return read_strategy_file(f)


def _refused(tmp_path, flags: str, where: str, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match=match) as exc:
        _read(tmp_path, flags)
    assert exc.value.where.endswith(f"run.sh: {where}"), exc.value.where


def _step(cli, *args: str) -> tuple[float, list[str]]:  # type: ignore[no-untyped-def]
    r = cli("predict", *MOE, *args, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    return doc["step_time_s"], doc["warnings"]


def test_capacity_factor_with_padding_is_priced_as_drop_and_pad(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The launch's drop-and-pad prices what the two training fields price by hand, and differs from dropless."""
    f = tmp_path / "pad.sh"
    f.write_text(LAUNCH + ALLTOALL + "--moe-expert-capacity-factor 1.25 --moe-pad-expert-input-to-capacity\n")
    plain = tmp_path / "plain.sh"
    plain.write_text(LAUNCH + ALLTOALL + "\n")
    read, warned = _step(cli, "--strategy", str(f))
    by_hand, _ = _step(cli, "--strategy", str(plain), "--set", "training.moe_pad_to_capacity=true", "--set",
                       "training.moe_rank_imbalance=1.25")
    dropless, _ = _step(cli, "--strategy", str(plain))
    assert read == by_hand and read != dropless
    assert not any("capacity" in w for w in warned), warned


def test_capacity_flags_not_priced_say_why(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for flags, said in (("--moe-expert-capacity-factor 1.25", "without --moe-pad-expert-input-to-capacity (tokens "
                                                               "past the capacity are dropped"),
                        ("--moe-expert-capacity-factor 0.5 --moe-pad-expert-input-to-capacity", "0.5 (a capacity "
                                                                                               "under"),
                        ("--moe-expert-capacity-factor -1", "negative: Megatron-Core reads it as no capacity factor"),
                        ("--moe-pad-expert-input-to-capacity", "without --moe-expert-capacity-factor (Megatron-Core "
                                                               "pads only to a capacity"),
                        ("--moe-expert-capacity-factor $CF", "not a number: a shell variable")):
        sf = _read(tmp_path, flags)
        assert any(said in u for u in sf.unused), (flags, sf.unused)
        assert "moe_pad_to_capacity" not in sf.training and "moe_rank_imbalance" not in sf.training


@pytest.mark.parametrize(("flags", "where", "match"), [
    (ALLTOALL + "--moe-pad-expert-input-to-capacity", "--moe-pad-expert-input-to-capacity", "alltoall dispatcher "
                                                                                             "asserts one"),
    ("--moe-token-dispatcher-type flex --moe-expert-capacity-factor 1 --moe-pad-expert-input-to-capacity",
     "--moe-pad-expert-input-to-capacity", "deepep backend"),
    ("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend ncclep --moe-expert-capacity-factor 1",
     "--moe-expert-capacity-factor", "ncclep"),
    ("--moe-expert-capacity-factor nan", "--moe-expert-capacity-factor", "finite"),
    ("--moe-expert-capacity-factor inf --moe-pad-expert-input-to-capacity", "--moe-expert-capacity-factor", "finite"),
    ("--moe-expert-capacity-factor one", "--moe-expert-capacity-factor", "finite"),
    ("--moe-expert-capacity-factor --moe-pad-expert-input-to-capacity", "--moe-expert-capacity-factor", "no value"),
    ("--moe-pad-expert-input-to-capacity=true", "--moe-pad-expert-input-to-capacity", "takes no value"),
    ("--delay-wgrad-compute", "--delay-wgrad-compute", "overlap_moe_expert_parallel_comm must be enabled"),
    ("--delay-wgrad-compute --no-delay-wgrad-compute", "--delay-wgrad-compute and --no-delay-wgrad-compute",
     "contradict"),
    ("--num-distributed-optimizer-instances 0", "--num-distributed-optimizer-instances", "at least 1 instance"),
    ("--num-distributed-optimizer-instances 2.5", "--num-distributed-optimizer-instances", "expected a count"),
])
def test_what_megatron_refuses_is_refused(tmp_path, flags: str, where: str, match: str) -> None:  # type: ignore[no-untyped-def]
    _refused(tmp_path, flags, where, match)


def test_delay_wgrad_compute_is_read_with_the_overlap(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Beside --overlap-moe-expert-parallel-comm the switch is what strategy moe_a2a_overlap prices: the same step,
    nothing said of it."""
    both, only = tmp_path / "both.sh", tmp_path / "only.sh"
    both.write_text(LAUNCH + ALLTOALL + "--overlap-moe-expert-parallel-comm --delay-wgrad-compute\n")
    only.write_text(LAUNCH + ALLTOALL + "--overlap-moe-expert-parallel-comm\n")
    (t_both, warned), (t_only, _) = _step(cli, "--strategy", str(both)), _step(cli, "--strategy", str(only))
    assert t_both == t_only and not any("delay-wgrad" in w for w in warned), warned


def test_optimizer_instances_say_the_sync_to_give(tmp_path) -> None:  # type: ignore[no-untyped-def]
    sf = _read(tmp_path, "--use-distributed-optimizer --num-distributed-optimizer-instances 4")
    assert any("sync hier:G:1 at zero 1 with G = dp / 4" in u for u in sf.unused), sf.unused
    assert "sync" not in sf.strategy
    one = _read(tmp_path, "--use-distributed-optimizer --num-distributed-optimizer-instances 1")
    assert not any("instances" in u for u in one.unused), one.unused


# --- 3. the corpus (scripts/fuzz41.py) ------------------------------------------------------------------------------
def test_a_sweep_out_set_with_one_output_over_an_input_writes_none(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The outs runner's set, in process: a new --out, an earlier output and a hard link to the sweep's own workload
    file; refused at the link (it would replace the input), the new file not created, the earlier one kept. (fuzz40's
    runner named a strategy file in its sweep, which a sweep refuses, so its --out cases never reached the outputs.)"""
    wl = tmp_path / "w.yaml"
    wl.write_text((Path(__file__).resolve().parent.parent / "examples" / "workloads" / "llama3-8b.yaml").read_text())
    sw = tmp_path / "sw.yaml"
    sw.write_text("kind: sweep\nname: s\nmodels: [w.yaml]\nclusters: [dgx-h100]\ngpus: [8]\n"
                  "strategies:\n  - {zero: '1'}\n")
    old = tmp_path / "old.csv"
    old.write_text("old\n")
    os.link(wl, tmp_path / "hl_w.csv")
    new = tmp_path / "new.jsonl"
    refused(cli, "sweep", str(sw), "--workers", "1", "--out", str(new), "--out", str(old), "--out",
            str(tmp_path / "hl_w.csv"), inputs=(sw, wl), match="--out")
    assert not new.exists() and old.read_text() == "old\n"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
