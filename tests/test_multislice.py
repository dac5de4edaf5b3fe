"""Multi-slice TPU training: the tpu-v5p-multislice cluster (slices on ICI, joined by the data-center network)
and HSDP over it (FSDP inside a slice, replicas across slices), against a hand count of the bytes each chip
sends across slices.

Published figures (hardware/SOURCES.md): Google's TPU v5p table gives 'Data center network (DCN) bandwidth
per chip (Gbps): 50' [GCP-v5p]; the scaling book gives ~2.5e10 B/s per 4-chip host [SCALING-BOOK]."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, load_yaml

from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload

DCN_PER_CHIP = 50e9 / 8  # [GCP-v5p] 50 Gb/s per chip, in bytes/s
DCN_EFFICIENCY = 0.62  # the cluster file's stated stand-in (pcie-25gbe's measured kernel-TCP share)
DCN_LATENCY = 35e-6


def _cli(*args: str) -> dict:  # type: ignore[type-arg]
    r = subprocess.run([sys.executable, "-m", "scalemodel", *args], capture_output=True, text=True, check=False,
                       cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def test_cluster_is_listed_and_its_dcn_tier_is_the_published_rate() -> None:
    listed = _cli("hardware", "list", "--json")
    assert "tpu-v5p-multislice" in [c["name"] for c in listed["clusters"]]
    spec = _cli("hardware", "show", "tpu-v5p-multislice", "--json")["spec"]
    tiers = {t["name"]: t for t in spec["tiers"]}
    assert list(tiers) == ["ici", "dcn"]
    assert tiers["dcn"]["bandwidth"] == pytest.approx(DCN_PER_CHIP)
    assert tiers["dcn"]["bandwidth"] == pytest.approx(2.5e10 / spec["gpus_per_node"])  # [SCALING-BOOK] per host / 4
    assert tiers["ici"]["span"] == 6144 and tiers["dcn"]["span"] == spec["max_gpus"] == 18432  # [GCP-v5p]
    assert tiers["ici"]["bandwidth"] == load_cluster("tpu-v5p-pod").tiers[0].bandwidth  # the slice is the pod's ICI


def _dp_comm(overrides: list[str], m: int, gpus: int = 16, shard: int = 8) -> tuple[float, float]:
    """(dp_comm seconds without overlap, the job's parameter count) for gpt-7.5b, tp = pp = 1, dp = gpus,
    zero hsdp with ``shard`` replicas per group, ``m`` micro-batches of one sequence per replica."""
    cl = load_cluster("tpu-v5p-multislice", overrides)
    wl = load_workload("gpt-7.5b")
    tr = TrainingSpec(global_batch=gpus * m, micro_batch=1, precision="bf16")
    job = build_job(cl, wl, tr)
    st = StrategySpec(zero="hsdp", shard_group=shard, overlap=False)
    res = evaluate(job, grid_from_strategy(st, tr, gpus, job), sync=st.sync)
    assert bool(np.asarray(res.feasible).reshape(-1)[0])
    return float(np.asarray(res.breakdown["dp_comm"]).reshape(-1)[0]), float(job.params)


@pytest.mark.parametrize("m", [1, 2])
def test_hsdp_over_dcn_bytes_by_hand(m: int) -> None:
    """Two slices of 8 chips (tiers.ici.span=8), dp 16, HSDP with the shard group = the slice (8).

    By hand: in each micro-batch every layer's bf16 gradients (2 bytes x P / L) are reduce-scattered inside
    the slice (ICI), then each chip's 1/8 shard is ring-all-reduced with the same shard on the other slice
    (p = 2: each chip sends 2 (p - 1) / p x shard = one shard across the DCN). Per step a chip sends
    m x L x (2 P / L / 8) = m x 2 P / 8 bytes over the DCN, at 6.25e9 B/s x 0.62 per chip.
    Doubling the DCN line rate halves exactly that bandwidth term and leaves the ICI gathers,
    reduce-scatters and every latency unchanged, so the difference of the two predictions is
    bytes / (B e) - bytes / (2 B e) = bytes / (2 B e)."""
    slow, params = _dp_comm(["tiers.ici.span=8"], m)
    fast, _ = _dp_comm(["tiers.ici.span=8", "tiers.dcn.bandwidth=100 Gbit/s"], m)
    dcn_bytes_per_chip = m * 2.0 * params / 8
    dcn_seconds = dcn_bytes_per_chip / (DCN_PER_CHIP * DCN_EFFICIENCY)
    assert slow - fast == pytest.approx(dcn_seconds / 2, rel=1e-6)
    # the same 16 chips as one slice: the replicas' all-reduce stays on ICI (600 GB/s x 0.8), so the DCN
    # bandwidth term plus at most 2 (p - 1) DCN latencies per layer and micro-batch separates the two
    one_slice, _ = _dp_comm(["tiers.ici.span=16"], m)
    layers = load_workload("gpt-7.5b").layers
    ici_seconds = dcn_bytes_per_chip / (600e9 * 0.8)
    assert dcn_seconds - ici_seconds <= slow - one_slice <= dcn_seconds + m * layers * 2 * DCN_LATENCY


def test_hsdp_dcn_latency_is_per_layer_and_microbatch() -> None:
    """Doubling the DCN latency adds between one and 2 (p - 1) = 2 latencies per all-reduce: L per micro-batch."""
    base, _ = _dp_comm(["tiers.ici.span=8"], 1)
    late, _ = _dp_comm(["tiers.ici.span=8", "tiers.dcn.latency=70 us"], 1)
    layers = load_workload("gpt-7.5b").layers
    assert layers * DCN_LATENCY * (1 - 1e-9) <= late - base <= layers * 2 * DCN_LATENCY * (1 + 1e-9)


def test_multislice_validation_cases_are_predicted() -> None:
    """The two MaxText multi-slice cases map to HSDP on tpu-v5p-multislice with the slice as shard group;
    PaLM's two pods (TPU v4, no DCN tier in the catalog) stay listed with the reason."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import validate_training as vt  # noqa: PLC0415 - a script, importable only with scripts/ on the path
    finally:
        sys.path.remove(str(ROOT / "scripts"))

    cases = {c["id"]: c for c in load_yaml(ROOT / "validation" / "training_cases.yaml")}
    for cid, slice_chips, shard in (("maxtext_v5p_128b_2x512", 256, 32), ("maxtext_v5p_1024b_2x4096", 2048, 128)):
        r = vt.predict_new_case(cases[cid])
        assert isinstance(r, vt.CaseResult), getattr(r, "reason", r)
        assert r.settings["cluster"] == "tpu-v5p-multislice"
        assert r.settings["zero"] == "hsdp" and r.settings["shard_group"] == shard
        assert r.settings["tp"] * shard == slice_chips
    palm = vt.predict_new_case(cases["palm_540b_tpuv4_6144"])
    assert isinstance(palm, vt.NotExpressed) and "data-center network" in palm.reason
    # the reason names what is missing (a TPU v4 DCN tier), not the HSDP pricing that exists on the v5 clusters
    assert "TPU v4" in palm.reason and "tpu-v5p-multislice" in palm.reason
