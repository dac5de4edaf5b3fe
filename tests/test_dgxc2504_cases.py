"""The dgxc2504 rows (NVIDIA/dgxc-benchmarking v25.04 llama3.1 on NeMo 25.02.01) priced with the settings their recipe
sets.

Layouts from llama3.1/llama31_utils.py llama31_auto_configs (v25.04.01 @85380ff): 70b fp8 TP 4, PP 8, CP 1, VP 5, GBS
GPUs x 2; 405b TP 8, PP 8, CP 2, VP 8, GBS GPUs / 2, and proxies of 8 layers (PP 1, GBS 64) on 32 GPUs, 30 layers (PP 4,
GBS 64) on 64 and 62 layers (PP 4, GBS 128) on 128. The 405B recipe (NeMo@d2b21556f2 recipes/llama31_405b.py trainer())
accounts the embedding and the loss in the pipeline split, so Megatron-Core core_r0.11.0 get_num_layers_to_build gives
each chunk (L + 2) / (PP x VP) slots, the first and last chunk one decoder layer fewer. MegatronCommOverlapCallback sets
the data-parallel overlap and the 128 Mi-element bucket only at data-parallel size (without CP) > 1
(megatron_comm_overlap.py _get_optimizer_overlap_cfgs): off for the 30-layer proxy, dp = 64 / (8 x 4 x 2) = 1.
"""

from __future__ import annotations

import re

import pytest
from conftest import script_module, training_cases

FULL = [f"dgxc2504_h100_llama31_405b_{p}_{g}" for p in ("bf16", "fp8") for g in (1024, 2048)]
PROXY = [f"dgxc2504_h100_llama31_405b_{n}l_{p}_{g}" for p in ("bf16", "fp8") for n, g in ((8, 32), (30, 64), (62, 128))]
L70 = [f"dgxc2504_h100_llama31_70b_fp8_{g}" for g in (64, 128, 256, 512, 1024, 2048)]


def test_all_sixteen_rows_are_compared() -> None:
    vt = script_module("validate_training")
    cases = training_cases()
    rows = sorted(i for i in cases if i.startswith("dgxc2504_"))
    assert rows == sorted(FULL + PROXY + L70)
    for i in rows:
        r = vt.predict_new_case(cases[i])
        assert not isinstance(r, vt.NotExpressed), i
        assert r.measured == cases[i]["measured"]["iteration_time_s"]


@pytest.mark.parametrize("cid", L70 + FULL + PROXY)
def test_layout_batch_and_printed_throughput(cid: str) -> None:
    """The layout llama31_auto_configs sets, and the README's throughput cell = 8192 x GBS / step time (a check of the
    transcription: the README prints the three figures separately)."""
    case = training_cases()[cid]
    par = case["parallelism"]
    g = par["gpus"]
    if "_70b_" in cid:
        want = dict(tp=4, pp=8, cp=1, gbs=2 * g, layers=80)
    elif cid in FULL:
        want = dict(tp=8, pp=8, cp=2, gbs=g // 2, layers=126)
    else:
        layers, pp, gbs = {32: (8, 1, 64), 64: (30, 4, 64), 128: (62, 4, 128)}[g]
        want = dict(tp=8, pp=pp, cp=2, gbs=gbs, layers=layers)
    assert (par["tp"], par["pp"], par["cp"]) == (want["tp"], want["pp"], want["cp"])
    assert par["global_batch_seqs"] == want["gbs"] and case["model"]["layers"] == want["layers"]
    assert par["dp"] * par["tp"] * par["pp"] * par["cp"] == g
    assert par["grad_accum"] == want["gbs"] // par["dp"]
    printed = re.search(r"'Throughput in tokens per second' \((\d+)\)", case["note"])
    assert printed is not None
    assert int(printed.group(1)) == pytest.approx(8192 * want["gbs"] / case["measured"]["iteration_time_s"], abs=1.0)


@pytest.mark.parametrize("cid,chunks", [("dgxc2504_h100_llama31_405b_bf16_1024", [1, 1]),
                                        ("dgxc2504_h100_llama31_405b_30l_fp8_64", [0, 0]),
                                        ("dgxc2504_h100_llama31_405b_62l_bf16_128", [1, 1]),
                                        ("dgxc2504_h100_llama31_405b_8l_bf16_32", None),
                                        ("dgxc2504_h100_llama31_70b_fp8_64", None)])
def test_pipeline_chunks_by_hand(cid: str, chunks: list[int] | None) -> None:
    """(126 + 2) / 64 = 2 slots a chunk, (30 + 2) / 32 = 1, (62 + 2) / 32 = 2; the first / last chunk one fewer.
    PP 1 and the 70B recipe (no account flags, 80 / 40 = 2 layers a chunk): the balanced split."""
    r = script_module("validate_training").predict_new_case(training_cases()[cid])
    assert r.settings["first_last_chunk_layers"] == chunks


@pytest.mark.parametrize("cid", L70 + FULL + PROXY)
def test_data_parallel_overlap_follows_the_callback(cid: str) -> None:
    vt = script_module("validate_training")
    case = training_cases()[cid]
    r = vt.predict_new_case(case)
    st = r.strategy
    dp1 = case["parallelism"]["dp"] == 1
    assert dp1 == ("_30l_" in cid)
    assert st.overlap is not dp1 and st.overlap_param_gather is not dp1
    # 128 x 1024 x 1024 elements of bf16 gradients (grad_reduce_in_fp32 False) where dp > 1, Megatron's own otherwise
    assert st.bucket_size == (None if dp1 else 128 * 1024 * 1024 * 2.0)
    assert st.megatron_ddp and st.align_grad_reduce is False
    assert st.overlap_p2p_comm is (case["parallelism"]["pp"] > 1)
    assert st.loss_impl == "megatron_fused"
    assert st.fp8_param_gather is ("_fp8_" in cid)
    assert r.settings["fp8_recipe"] is None  # delayed scaling, the model's default


def test_dp1_rule_touches_no_other_nemo2_row() -> None:
    """The callback's dp-1 branch is keyed to dgxc2504 because no row of the other NeMo 2 sources runs at dp 1."""
    checked = 0
    for i, c in training_cases().items():
        if i.split("_")[0] in ("nemo2502", "nemo2504", "dgxc2505"):
            assert int(c["parallelism"].get("dp", 0)) != 1, i
            checked += 1
    assert checked, "no nemo2502 / nemo2504 / dgxc2505 row: the rule was checked on nothing"  # 50 at 3d87a634
