"""Intel Gaudi: the gaudi2 accelerator, the gaudi2-8 / gaudi3-8 node clusters and the gaudi25 row (gaudi29).

Independent evidence, typed in from the sources hardware/SOURCES.md resolves: stas00/ml-engineering@744d01e1
[MAMF-GAUDI] (Gaudi 2 MME clock 1650 MHz x 256 x 256 FMA x 2 MMEs, 432 BF16 / 865 FP8 TFLOPS, 96 GB HBM2e at
2.46 TB/s, 600 W; MAMF 418.7 BF16 and 826.5 FP8 TFLOP/s); Intel's network-configuration page [GAUDI-NET] (21 scale-up
ports a card in an all-to-all, 3 a peer, 3 scale-out; 100 Gb/s on Gaudi 2, 200 Gb/s on Gaudi 3); Habana's pod layout
[HABANA-NET] (16 servers, 128 cards); Intel's Gaudi 2 performance page at 1.19.0 (LLaMA V2 7B, 8 HPU, 70523
tokens/sec) and HabanaAI/Megatron-DeepSpeed@891d6db (the row's layout).
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import pytest
from conftest import ROOT, load_yaml

from scalemodel.api import collective
from scalemodel.specs import load_accelerator, load_cluster

HW = ROOT / "hardware"
IN_LAYER = 0.901  # Korthikanti et al. 2022 Table 4 factor, borrowed by every family without a layer timing
T = 1e12
GBIT = 1e9 / 8  # bytes/s in one Gbit/s


def _validator() -> Any:
    spec = importlib.util.spec_from_file_location("validate_training", ROOT / "scripts" / "validate_training.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["validate_training"] = mod
    spec.loader.exec_module(mod)
    return mod


def _row() -> dict[str, Any]:
    cases = load_yaml(ROOT / "validation" / "training_cases.yaml")
    return next(c for c in cases if c["id"] == "gaudi25_gaudi2_llama2_7b_fp8")


def test_gaudi2_datasheet_values() -> None:
    a = load_accelerator("gaudi2")
    bf16 = 1650e6 * 256 * 256 * 2 * 2  # MME clock x FMA per MME per clock x 2 MMEs x 2 FLOP per FMA = 432.5e12
    assert a.peak_flops["bf16"] == pytest.approx(432 * T)
    assert a.peak_flops["bf16"] == pytest.approx(bf16, rel=2e-3)  # the printed 432 is the clock product rounded
    assert a.peak_flops["fp8"] == pytest.approx(865 * T)
    assert a.peak_flops["fp8"] == pytest.approx(2 * bf16, rel=2e-3)
    assert set(a.peak_flops) == {"bf16", "fp8"}  # FP32 / TF32 / FP16 rates are not published ([MAMF-GAUDI] note 8)
    assert a.memory == pytest.approx(96e9) and a.memory_bandwidth == pytest.approx(2.46e12)
    assert a.tdp == pytest.approx(600.0) and a.family == "gaudi" and a.vendor == "intel"


def test_gaudi2_gemm_level_is_the_mamf_bound_times_the_in_layer_factor() -> None:
    """One MAMF point per precision: gemm_max = MAMF / peak (the bound) x 0.901, rounded to 0.01 in the catalog."""
    raw = load_yaml(HW / "accelerators" / "gaudi2.yaml")["compute_efficiency"]
    assert raw["gemm_max"] == pytest.approx(418.7 / 432 * IN_LAYER, abs=0.005)  # 0.873
    assert raw["fp8"]["gemm_max"] == pytest.approx(826.5 / 865 * IN_LAYER, abs=0.005)  # 0.861
    assert raw["gemm_half_dim"] == raw["fp8"]["gemm_half_dim"] == 87  # d0 86.9 borrowed from h100-sxm, as gaudi3
    points = [p for p in load_yaml(HW / "measurements" / "gemm.yaml")["points"] if p["acc"] == "gaudi2"]
    assert sorted((p["prec"], p["tflops"], p["src"]) for p in points) == [("bf16", 418.7, "MAMF"),
                                                                           ("fp8", 826.5, "MAMF")]


@pytest.mark.parametrize(("name", "gbps"), [("gaudi2-8", 100), ("gaudi3-8", 200)])
def test_scale_up_tier_is_21_ports_all_to_all(name: str, gbps: int) -> None:
    c = load_cluster(name)
    up = c.tiers[0]
    assert c.gpus_per_node == 8 and up.span == 8
    assert up.bandwidth == pytest.approx(21 * gbps * GBIT)  # 262.5 / 525 GB/s a card a direction
    assert up.topology == "mesh" and up.full_mesh and not up.in_network_reduction
    assert up.bandwidth / 7 == pytest.approx(3 * gbps * GBIT)  # one peer: 3 ports
    assert load_cluster(name).accelerator.name == name.split("-")[0]


def test_gaudi2_scale_out_pod() -> None:
    c = load_cluster("gaudi2-8")
    out = c.tiers[1]
    assert out.span == c.max_gpus == 16 * 8  # [HABANA-NET] Large Pod: 16 servers of 8
    assert out.bandwidth == pytest.approx(3 * 100 * GBIT)
    assert out.bandwidth == pytest.approx(37.5e9)
    assert len(load_cluster("gaudi3-8").tiers) == 1 and load_cluster("gaudi3-8").max_gpus == 8


def test_full_mesh_reduce_scatter_by_hand() -> None:
    """A ring reduce-scatter of 8 GiB over the 8 cards of a gaudi2-8 box moves (n - 1)/n of the buffer through each
    card's 21 ports: (7/8) x 8 GiB / (262.5 GB/s x 0.94), latency negligible at this size."""
    size = 8 * 2**30
    hand = 7 / 8 * size / (21 * 100 * GBIT * 0.94)
    row = collective("gaudi2-8", "reducescatter", size, 8, algo="ring").rows[0]
    assert row["algorithms"][0]["time_s"] == pytest.approx(hand, rel=0.01)


def test_row_parsed_and_mapped() -> None:
    v = _validator()
    row = _row()
    assert v.accelerator_variant(row["hardware"]["gpu"]) == "Gaudi 2"
    assert v.CLUSTER_FOR_ACCELERATOR["Gaudi 2"] == "gaudi2-8" and v.CLUSTER_FOR_ACCELERATOR["Gaudi 3"] == "gaudi3-8"
    assert v.accelerator_variant("Intel Gaudi 3 (HL-325L)") == "Gaudi 3"
    assert row["measured"]["tokens_per_s_per_gpu"] == round(70523 / 8)
    assert row["derived_step_time_s"] == pytest.approx(1024 * 4096 / 70523, abs=1e-3)
    par = row["parallelism"]
    assert (par["tp"], par["pp"], par["dp"], par["gpus"]) == (1, 1, 8, 8)
    assert par["global_batch_seqs"] == 1024 and par["grad_accum"] == 1024 // (8 * par["microbatch"])
    assert v.parse_fp8_recipe(row["precision"]) is None  # delayed scaling: the model's default recipe
    assert v.case_limits(row) == []


def test_row_prices_deepspeed_zero1_without_overlap() -> None:
    """DeepSpeed ZeRO 1 on the one-stage PipelineEngine (review29d): the gradient reduction is exposed; the DP part
    of the predicted step is at least the two bandwidth terms by hand (reduce-scatter of the BF16 gradients,
    all-gather of the BF16 parameters, (7/8) x 6.74e9 x 2 B each over 262.5 GB/s x 0.94)."""
    v = _validator()
    got = v.predict_new_case(_row())
    assert got.settings["dp_overlap"] is False and got.settings["zero"] == "1" and got.settings["grad_bytes"] == 2.0
    assert got.settings["cluster"] == "gaudi2-8"
    floor = 2 * 7 / 8 * 6.74e9 * 2 / (21 * 100 * GBIT * 0.94)  # 0.0956 s
    step = 1024 * 4096 / 8 / got.predicted  # predicted step, s (tokens/s/GPU)
    assert step >= 1.93e17 / (8 * 865 * T) + floor  # no faster than the model FLOPs at FP8 peak plus the exposed sync
