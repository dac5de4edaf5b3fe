"""AMD Instinct MI350X (hw28): catalog values against AMD's figures, computed here by hand, and its borrowed curves.

Independent evidence (typed in from the sources hardware/SOURCES.md resolves): the MI355X Matrix-Core formula of
stas00/ml-engineering@744d01e1 [MAMF-AMD] (peak clock x 512 FMA x 2 x 1024 Matrix Cores) at the MI350X's 2200 MHz
peak engine clock ([HC25-MI350-WCCF]; [MAMF-AMD] note 22: 'the same silicon at 2200MHz and 1000W, with everything
scaled by the clock ratio (144.2 vs 157.3 fp32)'); AMD's rounded dense figures [AMD-MI350X] (FP16 / BF16 2.3, FP8
4.6, MXFP4 9.2 PFLOPS, FP32 144.2, FP64 72.1 TFLOPS); the ISSCC 2026 report [ISSCC26-MI355X] (8192 FP8 FLOPs per CU
per clock, 256 CUs); [MAMF-AMD]'s memory and power tables (288 GB HBM3e, 8.00 TB/s, 1000 W); the MI355X driver total
[ROCM-VRAM] (301973504 KiB, the same 8 x 36 GiB stacks).
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ROOT, load_yaml, script_module

from scalemodel.cost.compute import gemm_time
from scalemodel.specs import load_accelerator, load_cluster
from scalemodel.units import parse_quantity

HW = ROOT / "hardware"
T = 1e12
CLOCK_350, CLOCK_355 = 2200e6, 2400e6  # peak engine clocks, Hz


def _acc(name: str) -> dict[str, Any]:
    return load_yaml(HW / "accelerators" / f"{name}.yaml")


def _peak(name: str, prec: str) -> float:
    return parse_quantity(_acc(name)["peak_flops"][prec], "flop_rate")


def test_mi350x_datasheet_values() -> None:
    bf16 = CLOCK_350 * 512 * 2 * 1024  # the Matrix-Core formula at 2200 MHz
    assert _peak("mi350x", "bf16") == pytest.approx(bf16, rel=1e-5)
    assert _peak("mi350x", "bf16") == pytest.approx(2300 * T, rel=0.005)  # AMD's rounded '2.3 PFLOPS'
    assert _peak("mi350x", "fp16") == _peak("mi350x", "bf16")
    fp8 = 8192 * 256 * CLOCK_350  # [ISSCC26-MI355X] FP8 FLOPs per CU per clock x CUs x clock
    assert _peak("mi350x", "fp8") == pytest.approx(fp8, rel=1e-5)
    assert _peak("mi350x", "fp8") == pytest.approx(4600 * T, rel=0.005)  # '4.6'
    assert _peak("mi350x", "fp4") == pytest.approx(4 * bf16, rel=1e-5)
    assert _peak("mi350x", "fp4") == pytest.approx(9200 * T, rel=0.005)  # '9.2'
    assert _peak("mi350x", "fp32") == pytest.approx(256 * CLOCK_350 * 256, rel=1e-3)
    assert _peak("mi350x", "fp32") == pytest.approx(144.2 * T)
    assert _peak("mi350x", "fp64") == pytest.approx(72.1 * T)
    a = _acc("mi350x")
    assert "tf32" not in a["peak_flops"]  # CDNA4 publishes no TF32 rate
    # every peak is the MI355X's scaled by the clock ratio ([MAMF-AMD] note 22)
    for p in ("fp64", "fp32", "bf16", "fp16", "fp8", "fp4"):
        assert _peak("mi350x", p) == pytest.approx(_peak("mi355x", p) * CLOCK_350 / CLOCK_355, rel=2e-3), p
    # the MI355X's driver total (same 8 x 36 GiB HBM3E stacks): 288 GiB less 16 MiB
    assert parse_quantity(a["memory"], "bytes") == 301973504 * 1024 == 288 * 2**30 - 16 * 2**20
    assert parse_quantity(a["memory_bandwidth"], "bandwidth") == pytest.approx(8.0e12)
    assert parse_quantity(a["tdp"], "power") == pytest.approx(1000.0)
    assert a["compute_units"] == 256 and a["family"] == "cdna4" and a["vendor"] == "amd"


def test_mi350x_curves_are_mi355x_s_as_a_fraction_of_its_own_peak() -> None:
    """Borrowed whole, said so: a GEMM of any shape takes 2400 / 2200 x the MI355X's time, memory-bound work the
    same time (same HBM). The hand value: 2 m n k / (peak x gemm_max x prod d / (d + d0)) on each part."""
    a, b = _acc("mi350x"), _acc("mi355x")
    ca, cb = a["compute_efficiency"], b["compute_efficiency"]
    for key in ("gemm_max", "gemm_half_dim", "memory"):
        assert ca[key] == cb[key]
    for key in ("gemm_max", "gemm_half_dim"):
        assert ca["fp8"][key] == cb["fp8"][key]
    assert "BORROWED whole from mi355x" in ca["source"] and "2200 / 2400" in ca["source"]
    assert "BORROWED whole from mi355x" in ca["fp8"]["source"]
    assert a["attention_efficiency"]["aiter"]["fwd"] == b["attention_efficiency"]["aiter"]["fwd"]
    assert a["attention_efficiency"]["aiter"]["bwd"] == b["attention_efficiency"]["aiter"]["bwd"]
    assert "BORROWED from mi355x aiter" in a["attention_efficiency"]["aiter"]["source"]

    m, n, k = 16384, 4096, 14336  # the 8B model's FC1 at micro-batch 2 x 8192 tokens
    hand: dict[str, float] = {}
    for name, clock in (("mi350x", CLOCK_350), ("mi355x", CLOCK_355)):
        eff = 0.56 * m / (m + 119) * n / (n + 119) * k / (k + 119)
        hand[name] = 2 * m * n * k / (clock * 512 * 2 * 1024 * eff)
        spec = load_accelerator(name)
        ce = spec.compute_efficiency
        assert ce is not None
        t = float(gemm_time(m, n, k, peak_flops=spec.peak_flops["bf16"], memory_bandwidth=spec.memory_bandwidth,
                            gemm_max=ce.gemm_max, gemm_half_dim=ce.gemm_half_dim, memory_efficiency=ce.memory))
        assert t == pytest.approx(hand[name], rel=1e-5)
    assert hand["mi350x"] / hand["mi355x"] == pytest.approx(12 / 11)


def test_mi350x_8_is_the_mi355x_platform_with_its_gpu() -> None:
    a, b = load_yaml(HW / "clusters" / "mi350x-8.yaml"), load_yaml(HW / "clusters" / "mi355x-8.yaml")
    assert a["accelerator"] == "mi350x" and a["gpus_per_node"] == b["gpus_per_node"] == 8
    keep = ("name", "span", "bandwidth", "latency", "efficiency", "topology", "full_mesh", "nics_per_node")
    assert [{k: t.get(k) for k in keep} for t in a["tiers"]] == [{k: t.get(k) for k in keep} for t in b["tiers"]]
    x = a["tiers"][0]
    assert parse_quantity(x["bandwidth"], "bandwidth") == pytest.approx(7 * 153.6e9 / 2)  # 7 links, per direction
    assert load_cluster("mi350x-8").accelerator.name == "mi350x"


def test_mlperf_mi350x_row_is_compared_on_mi350x_8() -> None:
    """The row was 'hardware missing: the catalog holds no AMD Instinct MI350X'; now it maps onto mi350x-8 and
    nothing else in it is unexpressible (its settings are the MI355X row's, read from the same submission)."""
    v = script_module("validate_training")
    assert v.accelerator_variant("AMD Instinct MI350X") == "MI350X"
    assert v.CLUSTER_FOR_ACCELERATOR["MI350X"] == "mi350x-8"
    cases = {c["id"]: c for c in load_yaml(ROOT / "validation" / "training_cases.yaml")}
    row, twin = cases["mlpt51_mi350x_llama31_8b_8"], cases["mlpt51_mi355x_llama31_8b_8"]
    assert v.case_limits(row) == []
    assert row["hardware"]["catalog_cluster"] == "mi350x-8"
    assert row["parallelism"]["microbatch"] == twin["parallelism"]["microbatch"] == 2
    assert row["parallelism"]["global_batch_seqs"] == twin["parallelism"]["global_batch_seqs"] == 32
    assert v.rows_with("dp_overlap")["mlpt51_mi350x_llama31_8b_8"] is False
    assert row["measured"]["tokens_per_s_per_gpu"] == round(24.881 * 8192 / 8)
