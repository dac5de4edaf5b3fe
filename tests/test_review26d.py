"""review26d of tidy26: the refusal of a field given both by its option and by ``--set`` (9f5ce49a)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import ROOT

from scalemodel.cost import collectives as coll
from scalemodel.cost.placement import parallel_groups
from scalemodel.engine import sensitivity
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import StrategySpec, TrainingSpec


def test_a_switch_beside_its_set_is_named_as_given(cli) -> None:  # type: ignore[no-untyped-def]
    """``--sequence-parallel`` takes no value: the refusal named it ``--sequence-parallel True`` (Python's bool), an
    option the command line cannot hold. It names the switch as written."""
    r = cli("predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--sequence-parallel",
            "--set", "strategy.sequence_parallel=false")
    assert r.code == 2 and r.out == ""
    assert r.err.strip() == ("error: --set strategy.sequence_parallel: --sequence-parallel and --set "
                             "strategy.sequence_parallel=false both set strategy.sequence_parallel; one of them "
                             "(--sequence-parallel or --set strategy.sequence_parallel)"), r.err


@pytest.mark.parametrize("command, args", [
    ("predict", ["-n", "64"]),
    ("sensitivity", ["-n", "64"]),
    ("plan", ["-n", "64", "--top", "1"]),
    ("scale", ["--gpus", "64,128"]),
    ("check", [str(ROOT / "examples" / "scenarios" / "strong-scaling.yaml")]),
])
def test_straggler_cv_beside_its_set_is_refused(cli, command: str, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    """README: a field given both by its option and by ``--set`` is refused. ``--straggler-cv`` is the cluster's
    ``variability.cv`` ("default: the cluster's"), and beside ``--set cluster.variability.cv=0.3`` it was taken
    without a word (predict's straggler term 2.14 s at cv 0.1 either way, 8.50 s at 0.3 alone)."""
    model = [] if command == "check" else ["-m", "gpt-1.7b", "-c", "dgx-h100"]
    r = cli(command, *model, *args, "--straggler-cv", "0.1", "--set", "cluster.variability.cv=0.3")
    assert r.code == 2 and r.out == ""
    assert r.err.strip() == ("error: --set cluster.variability.cv: --straggler-cv 0.1 and --set "
                             "cluster.variability.cv=0.3 both set the cluster's variability.cv; one of them "
                             "(--straggler-cv or --set cluster.variability.cv)"), r.err


def test_straggler_cv_beside_another_variability_field_is_taken(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "64", "--straggler-cv", "0.1", "--set",
            "cluster.variability.dist=normal", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)  # testaudit37: the exit status alone passed a run that dropped the cv
    assert doc["inputs"]["straggler_cv"] == 0.1 and doc["breakdown_s"]["straggler"] > 0


def test_scales_no_switch_beside_its_set_is_named_as_given(cli) -> None:  # type: ignore[no-untyped-def]
    """scale takes the pair --sequence-parallel / --no-sequence-parallel (False an explicit choice there): the refusal
    named ``--no-sequence-parallel`` as ``--sequence-parallel False``."""
    r = cli("scale", "-m", "gpt-1.7b", "-c", "dgx-h100", "--gpus", "8,16", "--no-sequence-parallel", "--set",
            "strategy.sequence_parallel=true")
    assert r.code == 2 and r.out == ""
    assert r.err.strip() == ("error: --set strategy.sequence_parallel: --no-sequence-parallel and --set "
                             "strategy.sequence_parallel=true both set strategy.sequence_parallel; one of them "
                             "(--no-sequence-parallel or --set strategy.sequence_parallel)"), r.err


def _tp_cross_entropy_allreduce(m: float) -> dict[str, float]:
    """Llama-3 70B at tp 8 pp 4 on 512 H100s with the NVLink latency x m: one of the vocab-parallel cross-entropy's
    three all-reduces (4 T bytes, T = b s = 8,192 tokens) over the TP group, by NCCL algorithm."""
    cl, wl = load_cluster("dgx-h100"), load_workload("llama3-70b")
    tr, st = TrainingSpec(), StrategySpec(tp=8, pp=4)
    job = build_job(cl, wl, tr)
    (lat,) = [p for p in sensitivity.hardware_parameters(job) if p.name == "nvlink latency"]
    job = lat.perturb(job, m)
    g = grid_from_strategy(st, tr, 512, job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    assert float(np.ravel(g.micro_batch)[0]) * job.seq_len == 8192
    return {a: float(np.ravel(coll.group_time("allreduce", 4.0 * 8192, groups.tensor, algorithm=a))[0])
            for a in ("auto", "tree", "hierarchical")}


def test_the_70b_tp_term_is_held_by_nvls_which_carries_the_hop() -> None:
    """docs (engine/sensitivity.py): the min that holds Llama-3 70B's TP term is NCCL's algorithm choice. The
    cross-entropy's 32 KiB all-reduce runs NVLS (``hierarchical``), whose latency is NCCL's NVLink NVLS hwLatency
    (25 us, nccl.NVLS_LATENCY) read on the tier's measured hop as every hwLatency is (coll34; it was the fixed 25 us,
    which left a slower NVLink hop costing NVLS nothing): 2 + 25 - 0.6 = 26.4 us at 1x, and a latency x m costs it
    (m - 1) x 2 us, the one hop through the switch. Tree crosses 14 hops (2 x 7 in the node, 28 us a unit of m), so
    it undercuts NVLS between 0.6x and 0.57x."""
    one, up, low, below = (_tp_cross_entropy_allreduce(m) for m in (1.0, 1.01, 0.6, 0.57))
    assert all(d["auto"] == d["hierarchical"] for d in (one, up, low))
    assert one["hierarchical"] == pytest.approx(26.4e-6 + 32768 / 1e11, rel=0.05)  # latency-bound
    assert up["auto"] - one["auto"] == pytest.approx(0.01 * 2e-6, rel=1e-6)
    assert one["auto"] - low["auto"] == pytest.approx(0.4 * 2e-6, rel=1e-6)
    assert up["tree"] - one["tree"] == pytest.approx(0.01 * 28e-6, rel=1e-6)
    assert one["tree"] > low["tree"] > low["auto"] > below["tree"] == below["auto"]


def test_set_beside_a_flag_on_another_field_takes_both_and_a_repeated_set_its_last(cli) -> None:  # type: ignore[no-untyped-def]
    """README: a field given by its option and by --set is refused; --set of another field beside the option takes
    both (tidy26's test checked only the exit status), and the same field given twice by --set takes the last (a
    base and its override, as a --strategy file under explicit flags)."""
    r = cli("predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--set", "strategy.pp=2",
            "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)["inputs"]["strategy"]
    assert (s["tp"], s["pp"]) == (8, 2)
    r = cli("predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--set", "strategy.tp=4", "--set",
            "strategy.tp=8", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["inputs"]["strategy"]["tp"] == 8
