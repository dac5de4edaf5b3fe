"""Sensitivity analysis: elasticities checked against hand arithmetic and identities that must hold.

Identities used (see scalemodel/engine/sensitivity.py):
- a single GPU does no communication: every network elasticity is exactly 0 and the improvement
  ratio exactly 1; the step is homogeneous of degree -1 in (peak FLOP/s, memory bandwidth), so by
  Euler's theorem e_peak + e_membw = 1;
- a tier no communicating group reaches has elasticity 0;
- with communication, sum(e_speed) - sum(e_latency) <= 1, the gap being the fixed NCCL base latency;
- one worker never waits for a straggler: e_cv = 0 at dp = 1;
- every improvement (bandwidth x2, latency /2, ...) can only help: ratio >= 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import scalemodel
from scalemodel.commands.common import build_specs
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.sensitivity import sensitivity, sensitivity_for
from scalemodel.errors import InputError

GENERIC = """kind: generic
name: toy-dense
params: 100e6
flops_per_sample: 10e9
backward_factor: 2
"""


def run(cluster: str, model: str, gpus: int, *, training: dict[str, Any] | None = None,
        strategy: dict[str, Any] | None = None, straggler_cv: float | None = None, factor: float = 2.0) -> Any:
    cl, wl, tr, st = build_specs(cluster=cluster, model=model, sets=[], training=training or {},
                                 strategy=strategy or {})
    return sensitivity_for(cl, wl, gpus, tr, st, straggler_cv=straggler_cv, factor=factor)


def by_name(result: Any) -> dict[str, Any]:
    return {p.name: p for p in result.parameters}


def test_single_gpu_generic_matches_hand_roofline(tmp_path: Path) -> None:
    path = tmp_path / "toy.yaml"
    path.write_text(GENERIC)
    cl, wl, tr, st = build_specs(cluster="dgx-h100", model=str(path), sets=[], training={"global_batch": 8,
                                                                                          "micro_batch": 8},
                                 strategy={})
    job = build_job(cl, wl, tr, straggler_cv=0.0)
    # By hand: compute = 3 x forward FLOPs x batch / (peak x achieved GEMM fraction);
    # optimizer = params x (2 x 12 optimizer bytes + 2 grad + 4 + 2 weight copy: read the fp32 master, write 16-bit)
    # / (HBM bw x efficiency).
    peak = 989.4e12
    assert job.peak_flops == pytest.approx(peak)
    t_compute = 10e9 * 3 * 8 / (peak * job.gemm_max)
    t_opt = 100e6 * (2 * 12 + 2 + 4 + 2) / (3.35e12 * job.memory_efficiency)
    r = sensitivity(job, grid_from_strategy(st, tr, 1, job), factor=2.0)
    assert r.baseline_step_time_s == pytest.approx(t_compute + t_opt, rel=1e-9)
    p = by_name(r)
    # d ln X / d ln peak = t_compute / (t_compute + t_opt); the 1% central difference is within ~1e-5 of it
    assert p["peak FLOP/s"].elasticity == pytest.approx(t_compute / (t_compute + t_opt), rel=1e-4)
    assert p["memory bandwidth"].elasticity == pytest.approx(t_opt / (t_compute + t_opt), rel=1e-4)
    assert p["peak FLOP/s"].throughput_ratio == pytest.approx((t_compute + t_opt) / (t_compute / 2 + t_opt))
    assert p["memory bandwidth"].throughput_ratio == pytest.approx((t_compute + t_opt) / (t_compute + t_opt / 2))
    for q in r.parameters:
        if q.group in ("network", "stragglers", "capacity"):
            assert q.elasticity == 0.0 and q.throughput_ratio == 1.0, q.name
    assert r.bound == ("compute" if t_compute > t_opt else "memory")
    # ranked by |elasticity|
    mags = [abs(q.elasticity) for q in r.parameters]
    assert mags == sorted(mags, reverse=True)


def test_single_gpu_transformer_euler_identity_and_no_network() -> None:
    r = run("dgx-h100", "llama2-7b", 1, training={"global_batch": 4}, straggler_cv=0.1)
    p = by_name(r)
    assert p["peak FLOP/s"].elasticity + p["memory bandwidth"].elasticity == pytest.approx(1.0, abs=1e-6)
    for q in r.parameters:
        if q.group == "network":
            assert q.elasticity == 0.0 and q.throughput_ratio == 1.0, q.name
    # one worker never waits for a slower one, whatever the CV
    assert p["straggler CV"].elasticity == 0.0
    assert r.group_ratios["network"] == 1.0


def test_unused_tiers_have_zero_elasticity_and_used_ones_do_not() -> None:
    # 16 GPUs of pure DP on dgx-a100 (nvlink span 8, then ib-leaf, spine, core): the DP all-reduce spans
    # two nodes, so only nvlink and ib-leaf carry traffic. (Not dgx-h100: there NCCL's NVLSTree wins on
    # two nodes and is capped by perChMaxNVLSTreeBw and the NVLS efficiency, not by the NICs, so a faster
    # leaf changes nothing; docs/model.md#in-network-reduction.)
    r = run("dgx-a100", "gpt-1.7b", 16, training={"global_batch": 16})
    p = by_name(r)
    for tier in ("ib-spine", "ib-core"):
        for what in ("bandwidth", "latency"):
            assert p[f"{tier} {what}"].elasticity == 0.0
            assert p[f"{tier} {what}"].throughput_ratio == 1.0
    # ib-leaf carries traffic: a 2x faster leaf helps (the local derivative may be 0 when the
    # chosen all-reduce is bottlenecked elsewhere and another algorithm only wins further out)
    assert p["ib-leaf bandwidth"].elasticity >= 0
    assert p["ib-leaf bandwidth"].throughput_ratio > 1.0


def test_signs_ratios_and_euler_bound_with_communication() -> None:
    r = run("pcie-25gbe", "gpt-1.7b", 64, training={"global_batch": 64}, straggler_cv=0.05)
    speeds = latencies = 0.0
    for q in r.parameters:
        assert q.throughput_ratio >= 1.0 - 1e-12, q.name
        if q.name.endswith("latency") or q.name == "straggler CV":
            assert q.elasticity <= 0.0, q.name
        else:
            assert q.elasticity >= 0.0, q.name
        if q.group in ("compute", "memory") or q.name.endswith("bandwidth"):
            speeds += q.elasticity if q.group != "capacity" else 0.0
        elif q.name.endswith("latency"):
            latencies += q.elasticity
    # Scaling every speed by c and every latency by 1/c divides all times by c except the fixed
    # NCCL base latency, so the weighted sum is 1 minus that (small) share.
    assert 0.9 < speeds - latencies <= 1.0 + 1e-6
    p = by_name(r)
    assert p["straggler CV"].elasticity < 0
    # the whole network improved at once buys at least as much as any one tier
    tiers = [q.throughput_ratio for q in r.parameters if q.group == "network"]
    assert r.group_ratios["network"] >= max(tiers) - 1e-12
    # a commodity 25 GbE network for 1.7B parameters of gradients: the network dominates
    assert r.bound == "network"
    assert "network-bound" in r.conclusion


def test_memory_capacity_changes_feasibility_not_speed() -> None:
    from scalemodel.engine.predict import predict

    cl, wl, tr, st = build_specs(cluster="dgx-h100", model="gpt3-175b", sets=[], training={"global_batch": 1536},
                                 strategy={"tp": 8, "pp": 4})  # pp 8 fits since the H100 is its 81559 MiB
    pred = predict(cl, wl, 1024, tr, st)
    need = pred.memory["per_gpu_bytes"] / pred.memory["capacity_bytes"]
    assert 1.0 < need < 2.0  # does not fit the H100's 85.5 GB, would fit twice that
    r = sensitivity_for(cl, wl, 1024, tr, st)
    cap = by_name(r)["memory capacity"]
    assert cap.elasticity == 0.0 and cap.throughput_ratio == 1.0
    assert not r.fits and cap.fits_when_improved
    assert r.baseline_tokens_per_s == pytest.approx(pred.throughput["tokens_per_s"])


def test_bad_factor_is_an_input_error() -> None:
    with pytest.raises(InputError, match="factor"):
        run("dgx-h100", "gpt-1.7b", 8, factor=1.0)


def test_cli_json_and_table(cli: Any) -> None:
    res = cli("sensitivity", "--cluster", "dgx-h100", "--model", "gpt-1.7b", "--gpus", "16", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["command"] == "sensitivity" and "schema_version" in doc
    assert set(doc["baseline"]) >= {"tokens_per_s", "step_time_s"}
    names = {p["name"] for p in doc["parameters"]}
    assert {"peak FLOP/s", "memory bandwidth", "nvlink bandwidth", "nvlink latency", "straggler CV",
            "memory capacity"} <= names
    for p in doc["parameters"]:
        assert set(p) >= {"name", "value", "unit", "elasticity", "improved_by", "throughput_ratio"}
    table = cli("sensitivity", "--cluster", "dgx-h100", "--model", "gpt-1.7b", "--gpus", "16")
    assert table.code == 0 and "elasticity" in table.out and "bound" in table.out
    bad = cli("sensitivity", "--factor", "0.5")
    assert bad.code == 2 and "--factor" in bad.err


def test_a_kink_is_named(cli):
    """Llama 3 405B, TP 8 x PP 16 (interleaved 2, Meta's 3-layer first/last chunks), 16,384 H100s: the DP group
    crosses ib-leaf and ib-spine, both 50 GB/s. Their rows read elasticity +0.012 and x2 +0.0%: less of either slows
    the step, more of one alone buys nothing (the other binds at the same 50 GB/s), so the central difference is half
    the downward slope. The note names exactly the rows with a positive elasticity and an improvement ratio of 1."""
    import json

    res = cli("sensitivity", "-c", "dgx-h100", "-m", "llama3-405b", "-n", "16384", "--tp", "8", "--pp", "16",
              "--global-batch", "2048", "--sequence-parallel", "--schedule", "interleaved:2", "--set",
              "strategy.first_chunk_layers=3", "--set", "strategy.last_chunk_layers=3", "--zero", "1", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    flat = [r["name"] for r in doc["parameters"] if r["elasticity"] >= 1e-3 and r["throughput_ratio"] == 1.0]
    assert "ib-leaf bandwidth" in flat and "ib-spine bandwidth" in flat
    (note,) = [n for n in doc["notes"] if "kink" in n]
    assert set(note.split(":")[0].split(", ")) == set(flat)


def test_clock_jitter_cv_is_a_hardware_parameter() -> None:
    """The jitter part is linear in the accelerator's clock_jitter_cv (t_jit = busy x cv x e_G, docs/model.md#jitter),
    so throughput's elasticity to it is -t_jit / T (d ln(1/T) / d ln cv); halving it buys T / (T - t_jit / 2). An
    accelerator without the field: elasticity 0, nothing bought."""
    pred = scalemodel.predict("dgx-h100", "gpt-1.7b", 16, tp=8)
    jit, t = pred.breakdown_s["jitter"], pred.step_time_s
    assert jit > 0
    p = by_name(run("dgx-h100", "gpt-1.7b", 16, strategy={"tp": 8}))["clock jitter CV"]
    assert p.group == "stragglers" and p.improved_by == "/2"
    assert p.value == pytest.approx(0.0118, abs=1e-4)
    assert p.elasticity == pytest.approx(-jit / t, rel=1e-3)
    assert p.throughput_ratio == pytest.approx(t / (t - jit / 2), rel=1e-6)
    q = by_name(run("dgx-a100", "gpt-1.7b", 16, strategy={"tp": 8}))["clock jitter CV"]
    assert q.value == 0.0 and q.elasticity == 0.0 and q.throughput_ratio == 1.0
