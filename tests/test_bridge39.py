"""Which launches turn on Megatron-Core's ``overlap_param_gather_with_optimizer_step`` and which loss paths read the
token count on the host, per validation source, as read in each source's own launch code (sources.yaml
``optimizer_step_gather`` / ``loss_token_count_read`` citations; validation/README.md#nemo39, bridge39 part).

The expected values below are the launch rules as read, applied to each row's own parallelism and precision, not the
validator's output copied back:

* Megatron-Bridge 26.04 / 26.06 / 26.08 (v0.4.2 / v0.5.0 / v0.6.0) scripts/performance/utils/overrides.py
  set_post_overrides: ``dp > 1 and pp > 1 and vp > 1 and compute_dtype not in ("fp8_mx", "nvfp4")`` (L480-486 /
  L526-532 / L683-689), so the FP8-CS rows with a virtual pipeline take it and the MXFP8 / NVFP4 ones do not.
* MLPerf NeMo llama31_405b: config_common.sh exports OVERLAP_PARAM_GATHER_WITH_OPTIM_STEP=True (v5.0 NVIDIA eos-dfw
  L68, v5.1 Nebius L68); config_common_cg.sh, sourced after it by the CUDA-graph configs of University of Florida and
  NVIDIA's 25.09 submissions, sets it False (L4). NeMo v2.2.0 (mlpt50, Nebius) reads the token count on the host;
  NeMo 25.09-alpha (contains 58f6689700) does not.
* Megatron-LM 9c5258f109 (mcrec26: OptimizerConfig default False, no recipe sets it), NeMo 24.07 (nemo2407: no such
  option): off. Megatron-Bridge's and Megatron-LM's loss functions keep the token count on the device.
"""

from __future__ import annotations

import sys
from typing import Any

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import validate_training as vt  # noqa: E402

_CASES = {c["id"]: c for c in vt.read_yaml(vt.NEW_CASES)}


def _strategy(cid: str) -> Any:
    r = vt.predict_new_case(_CASES[cid])
    assert hasattr(r, "strategy"), f"{cid} is not expressed: {r}"
    return r.strategy


def _layout(cid: str) -> bool:
    par = _CASES[cid]["parallelism"]
    return all(int(par.get(k) or 1) > 1 for k in ("dp", "pp", "interleaved_stages_per_device"))


def _bridge26_rule(cid: str) -> bool:
    """set_post_overrides' rule from the row's id (its precision suffix) and parallelism."""
    excluded = cid.endswith(("_fp8mx", "_nvfp4")) or "_fp8mx_" in cid or "_nvfp4_" in cid
    return _layout(cid) and not excluded


BRIDGE26_ON = {"mb2604_h100_llama3_70b_fp8cs", "mb2604_h100_qwen3_235b_fp8cs", "mb2606_h100_llama31_405b_fp8cs",
               "mb2606_gb300_llama31_405b_fp8cs"}
BRIDGE26_OFF = {"mb2604_b200_dsv3_mtp_fp8mx", "mb2604_gb300_llama3_70b_fp8mx", "mb2604_gb200_llama3_70b_fp8mx",
                "mb2604_gb300_llama3_70b_nvfp4", "mb2604_gb200_llama3_70b_nvfp4", "mb2606_gb300_llama31_405b_fp8mx",
                "mb2606_gb200_llama31_405b_fp8mx", "mb2606_gb300_llama31_405b_nvfp4",
                "mb2606_gb200_llama31_405b_nvfp4", "mb2608_gb200_dsv3_mtp_fp8mx", "mb2608_gb200_qwen3_235b_fp8mx",
                "mb2608_gb300_dsv3_mtp_fp8mx", "mb2608_gb300_qwen3_235b_fp8mx"}


def test_bridge26_rows_named() -> None:
    """The rows named here are all the Bridge 26.x rows with dp, pp, vp > 1, split by the precision rule."""
    layout = {cid for cid in _CASES if cid.split("_")[0] in ("mb2604", "mb2606", "mb2608") and _layout(cid)}
    assert layout == BRIDGE26_ON | BRIDGE26_OFF
    assert {cid for cid in layout if _bridge26_rule(cid)} == BRIDGE26_ON


def test_bridge26_rows_take_the_launch_rule() -> None:
    for cid in sorted(BRIDGE26_ON | BRIDGE26_OFF):
        st = _strategy(cid)
        assert st.overlap_param_gather_with_optimizer_step == (_bridge26_rule(cid) and str(st.zero) == "1"), cid
        assert not st.loss_token_count_read, cid  # masked_next_token_loss: num_tokens stays on the device
    for cid in BRIDGE26_ON:  # all four are distributed-optimizer rows: the rule acts on each
        assert _strategy(cid).overlap_param_gather_with_optimizer_step, cid


def test_bridge26_rows_without_a_virtual_pipeline_stay_off() -> None:
    """1F1B / no-pp Bridge 26.x rows: the rule's vp > 1 fails whatever the precision (sample of each release)."""
    for cid in ("mb2604_h100_gpt_oss_120b_bf16", "mb2606_h100_qwen3_30b_fp8cs", "mb2608_gb200_qwen3_30b_fp8mx"):
        assert not _layout(cid)
        st = _strategy(cid)
        assert not st.overlap_param_gather_with_optimizer_step and not st.loss_token_count_read, cid


MLPT50 = ["mlpt50_h100_llama31_405b_512", "mlpt50_h100_llama31_405b_2048", "mlpt50_h100_llama31_405b_2432",
          "mlpt50_h100_llama31_405b_2560", "mlpt50_h100_llama31_405b_8192"]
NEBIUS = ["mlpt51_h200_llama31_405b_512", "mlpt51_h200_llama31_405b_1024"]
CUDA_GRAPH_405B = ["mlpt51_b200_llama31_405b_256", "mlpt51_b200_llama31_405b_448",
                   "mlpt51_gb200_llama31_405b_512_nvfp4", "mlpt51_gb300_llama31_405b_512_nvfp4",
                   "mlpt51_gb200_llama31_405b_2560_nvfp4", "mlpt51_gb200_llama31_405b_5120_nvfp4"]


def test_mlperf_405b_rows() -> None:
    """config_common.sh's True (NeMo v2.2.0: token read too) unless config_common_cg.sh follows it (25.09: no read)."""
    for cid in MLPT50 + NEBIUS:
        assert _layout(cid)
        st = _strategy(cid)
        assert st.overlap_param_gather_with_optimizer_step and st.loss_token_count_read, cid
    for cid in CUDA_GRAPH_405B:
        assert _layout(cid)
        st = _strategy(cid)
        assert not st.overlap_param_gather_with_optimizer_step and not st.loss_token_count_read, cid
    srcs = vt.read_yaml(vt.ROOT / "validation" / "sources.yaml")["sources"]
    assert srcs["mlpt50"]["optimizer_step_gather"]["value"] is True
    assert "optimizer_step_gather" not in srcs["mlpt51"]  # per row: the CUDA-graph configs turn it off


def test_megatron_lm_and_nemo2407_rows_stay_off() -> None:
    """Megatron-LM's moe_recipes (mcrec26) and NeMo 24.07 (nemo2407): the switch is never set, even at dp, pp, vp > 1;
    neither reads the token count."""
    rows = [cid for cid in _CASES if cid.split("_")[0] in ("mcrec26", "nemo2407") and _layout(cid)]
    expressed = [cid for cid in rows if hasattr(vt.predict_new_case(_CASES[cid]), "strategy")]
    assert len(expressed) >= 8  # nemo2407's five and mcrec26's expressed interleaved rows
    for cid in expressed:
        st = _strategy(cid)
        assert not st.overlap_param_gather_with_optimizer_step and not st.loss_token_count_read, cid
