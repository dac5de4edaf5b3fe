"""unexpr38: the audit of the rows listed as not expressible (validation/README.md, "The listing rule").

* fms24's two 13B rows: the every-k-th-block recompute's k is fixed by the source's own MFU / HFU table
  (foundation-model-stack/fms-fsdp README.md at 5e522b4), checked here by interval arithmetic on the printed
  figures alone, and the model's own HFU / MFU for the row then lies inside the printed 13B ratio's rounding interval;
* the listing rule reads the configuration, never the measurement (scaling a row's measured values changes no
  reason);
* restated reasons: FSDP's parameter offload (an SGD step on the host, save_on_cpu under recompute), Megatron-Core's
  optimizer-state offload (GPU Adam, copies between steps), an unstated sequence length.
"""

from __future__ import annotations

import copy
from fractions import Fraction as F
from typing import Any

import msgspec
import pytest
from conftest import script_module

from scalemodel.engine.predict import predict

#: fms-fsdp README.md at 5e522b4, "Training throughput benchmarks": (MFU, HFU) per model and GPU, two digits
PRINTED = {("7B", "A100"): ("0.57", "0.57"), ("13B", "A100"): ("0.51", "0.59"), ("34B", "A100"): ("0.47", "0.64"),
           ("70B", "A100"): ("0.50", "0.67"), ("7B", "H100"): ("0.37", "0.37"), ("13B", "H100"): ("0.35", "0.40"),
           ("34B", "H100"): ("0.32", "0.44"), ("70B", "H100"): ("0.34", "0.45")}
HALF = F(5, 1000)  # half of the last printed digit


def ratio_interval(key: tuple[str, str]) -> tuple[F, F]:
    """HFU / MFU's interval over the two figures' rounding."""
    mfu, hfu = (F(x) for x in PRINTED[key])
    return (hfu - HALF) / (mfu + HALF), (hfu + HALF) / (mfu - HALF)


@pytest.fixture(scope="module")
def vt() -> Any:
    return script_module("validate_training")


@pytest.fixture(scope="module")
def cases(vt: Any) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in vt.read_yaml(vt.NEW_CASES)}


def test_k_is_two_from_the_printed_ratios() -> None:
    """No AC: the two counters agree (1.00 inside both 7B intervals). Full AC (k = 1): the 34B / 70B rows' intervals
    share R1. Every k-th block: 1 + (R1 - 1) / k; only k = 2 meets both 13B intervals."""
    for gpu in ("A100", "H100"):
        lo, hi = ratio_interval(("7B", gpu))
        assert lo <= 1 <= hi
    full = [ratio_interval((m, g)) for m in ("34B", "70B") for g in ("A100", "H100")]
    r_lo, r_hi = max(i[0] for i in full), min(i[1] for i in full)
    assert r_lo < r_hi
    assert (float(r_lo), float(r_hi)) == pytest.approx((1.338, 1.358), abs=5e-4)
    fits = []
    for k in range(1, 9):
        k_lo, k_hi = 1 + (r_lo - 1) / k, 1 + (r_hi - 1) / k
        if all(k_lo <= ratio_interval(("13B", g))[1] and k_hi >= ratio_interval(("13B", g))[0]
               for g in ("A100", "H100")):
            fits.append(k)
    assert fits == [2]


@pytest.mark.parametrize("rid", ["fms24_a100_llama2_13b_fsdp_128", "fms24_h100_llama2_13b_fsdp_96"])
def test_fms24_13b_rows_compared_with_every_second_block(vt: Any, cases: dict[str, Any], rid: str) -> None:
    """The row records k = 2 as 20 of 40 layers fully recomputed, is compared (not listed), and the model's
    executed / model FLOPs lies inside the printed 13B HFU / MFU interval (an independent published figure)."""
    case = cases[rid]
    assert "held_out" not in case and vt.case_limits(case) == []
    assert case["parallelism"]["recompute_layers"] * 2 == case["model"]["layers"] == 40
    assert vt.parse_recompute(case["parallelism"]["recompute"]) == "full"
    r = vt.predict_new_case(case)
    assert isinstance(r, vt.CaseResult)
    assert r.strategy.recompute == "full" and r.strategy.recompute_layers == 20
    cname = r.settings["cluster"]
    cluster = vt.load_cluster(cname, vt.cluster_overrides(case, cname))
    wl = vt.case_workload(case)[0]
    gpus = int(case["parallelism"]["gpus"])

    def flops(**kw: Any) -> tuple[float, float]:
        p = predict(cluster, wl, gpus, r.training, msgspec.structs.replace(r.strategy, **kw))
        return float(p.flops["hardware_flops_per_step"]), float(p.flops["model_flops_per_step"])

    hw20, model = flops()
    hw40, _ = flops(recompute_layers=None)
    hw0, model0 = flops(recompute="none", recompute_layers=None)
    assert model == model0
    # each recomputed layer reruns its forward once: half the layers, half the extra FLOPs
    assert hw20 - hw0 == pytest.approx((hw40 - hw0) / 2, rel=1e-9)
    lo, hi = ratio_interval(("13B", "A100" if "a100" in rid else "H100"))
    assert float(lo) <= hw20 / model <= float(hi)


def test_listing_reads_no_measurement(vt: Any, cases: dict[str, Any]) -> None:
    """The rule decides from the configuration: every row's reasons are the same with its measured figures doubled."""
    for case in cases.values():
        before = vt.case_limits(case)
        scaled = copy.deepcopy(case)
        scaled["measured"] = {k: (2 * v if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                              for k, v in case["measured"].items()}
        assert vt.case_limits(scaled) == before, case["id"]


def test_fsdp_parameter_offload_reason(vt: Any, cases: dict[str, Any]) -> None:
    """fsdpaws22: FSDP's CPU step (SGD, unmeasured) and save_on_cpu under recompute; no Megatron-Core reason, and no
    stale 'whole-layer activation offload only' (offload_states has priced parameter offload since offload35)."""
    why = " ".join(vt.case_limits(cases["fsdpaws22_a100_40g_gpt1t_fsdp512"]))
    assert "SGD" in why and "save_on_cpu" in why and "offload_states optimizer+params" in why
    assert "OptimizerStateOffloader" not in why and "activation offload only" not in why


def test_megatron_optimizer_state_offload_reason(vt: Any, cases: dict[str, Any]) -> None:
    why = vt.case_limits(cases["mcrec26_gb200_dsv3_mtp_fp8mx"])
    assert any("OptimizerStateOffloader" in w and "Adam on the GPU" in w for w in why)
    assert any("offload_modules" in w for w in why)
    # the same marker beside FSDP's parameter offload names FSDP's own CPU step instead
    case = copy.deepcopy(cases["mcrec26_gb200_dsv3_mtp_fp8mx"])
    case["parallelism"]["offload"] = "offload_params (x), offload_optimizer_states (y)"
    assert not any("OptimizerStateOffloader" in w for w in vt.case_limits(case))


def test_sequence_length_not_stated(vt: Any, cases: dict[str, Any]) -> None:
    rows = [c for i, c in cases.items() if i.startswith(("primus26_mi300x_", "primus26_mi355x_qwen3"))]
    assert len(rows) == 13
    for c in rows:
        assert "sequence length not stated" in vt.case_limits(c)
    case = copy.deepcopy(cases["fms24_a100_llama2_13b_fsdp_128"])
    case["model"]["seq_len"] = "not stated"
    assert vt.case_limits(case) == ["sequence length not stated"]


def test_each_unstated_parallel_degree_is_named(vt: Any, cases: dict[str, Any]) -> None:
    """mcore26's table states none of TP, PP, EP (the reason named TP alone); OPT states PP and DP but not TP."""
    why = vt.case_limits(cases["mcore26_gb300_qwen3_235b_fp8mx"])
    assert "tensor-, pipeline- and expert-parallel degrees not stated" in why
    assert "tensor-parallel degree not stated" in vt.case_limits(cases["opt_175b_992"])
