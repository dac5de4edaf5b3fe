"""moe30: the MoE cross-row audit (scripts/moe_audit.py) and what it settled about the DGX Cloud DeepSeek-V3 rows.

Values are computed by hand here: the tokens each expert receives, the NVLink domains an EP group covers, the
validator's sign convention on an ``iter s`` row (the DGX Cloud GB200 DeepSeek-V3 rows are predicted too FAST, not too
slow), and NeMo's Slurm segment for the GB200 jobs (NVIDIA/NeMo@7a8f1cc7bc scripts/performance/utils.py L114-120).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from conftest import load_yaml, script_module
from test_validation import NEW_CASES, needs_new_cases


def test_tokens_per_expert_by_hand() -> None:
    audit = script_module("moe_audit")
    # dgxc2505 GB200 DeepSeek-V3 at 128 GPUs: MBS 1, s 4096, TP 2 (SP), EP 32, top-8 of 256:
    # 4096 / 2 = 2048 tokens a rank, 32 ranks route 8 copies each over 256 experts: 2048 x 32 x 8 / 256 = 2048
    assert audit.tokens_per_expert(1, 4096, 2, 1, 32, 1, 8, 256) == 2048
    # Grok-1 on GB200: TP 4, EP 8 with ETP 4 (32 ranks), top-2 of 8: 1024 x 32 x 2 / 8 = 8192
    assert audit.tokens_per_expert(1, 4096, 4, 1, 8, 4, 2, 8) == 8192


def test_ep_domains_by_hand() -> None:
    audit = script_module("moe_audit")
    assert audit.ep_domains(64, 1, 72) == 1   # EP 64 in an NVL72 domain
    assert audit.ep_domains(64, 1, 8) == 8    # EP 64 over eight 8-GPU nodes (the H100 DeepSeek-V3 rows)
    assert audit.ep_domains(128, 4, 8) == 64  # Llama 4 Maverick on H100: EP 128 x ETP 4 = 512 ranks
    assert audit.ep_domains(4, 1, 8) == 1


def test_feature_groups() -> None:
    audit = script_module("moe_audit")
    assert [audit.source_kind(s) for s in ("mb2511", "mb2608", "nemo2504", "mcrec26", "dgxc2505", "titan25")] == \
        ["mb25xx", "mb26xx", "nemo*", "mcrec26", "dgxc2505", "other"]
    assert [audit.local_bin(n) for n in (1, 4, 5, 8, 16, 64)] == ["1-4", "1-4", "5-8", "5-8", "9+", "9+"]


def test_headline_medians_by_hand() -> None:
    audit = script_module("moe_audit")
    base = {f: "x" for f in audit.FEATURES}
    rows = [dict(base, host_sync="host floor", speed_error=e) for e in (0.30, 0.10, 0.20)]
    rows += [dict(base, host_sync="none", speed_error=e) for e in (-0.20, 0.04)]
    got = {(f, k): (n, med, mabs, hi, lo) for f, k, n, med, mabs, hi, lo in audit.headline(rows)}
    assert got[("host_sync", "host floor")] == (3, pytest.approx(0.20), pytest.approx(0.20), 2, 0)
    # median of (-0.20, 0.04) = -0.08; of (0.20, 0.04) = 0.12; one row beyond -15 %
    assert got[("host_sync", "none")] == (2, pytest.approx(-0.08), pytest.approx(0.12), 0, 1)
    assert got[("dispatcher", "x")][0] == 5
    assert audit.cross(rows, "host_sync", "dispatcher") == [("host floor", "x", 3, pytest.approx(0.20)),
                                                              ("none", "x", 2, pytest.approx(-0.08))]


def test_iter_rows_sign_a_short_predicted_step_is_too_fast() -> None:
    """The DGX Cloud GB200 DeepSeek-V3 row at 128 GPUs measures 34.168 s a step; a prediction of 18.144 s is a time
    error (18.144 - 34.168) / 34.168 = -46.9 % and a speed error 34.168 / 18.144 - 1 = +88.3 %: too fast."""
    vt = script_module("validate_training")
    p = SimpleNamespace(breakdown_s={"compute": 15.0, "ep_comm": 1.3}, step_time_s=18.144)
    r = vt._result("row", "iter s", 34.168, 18.144, p, {})
    assert r.error == pytest.approx((18.144 - 34.168) / 34.168)
    assert r.error < 0 < r.speed_error
    assert r.speed_error == pytest.approx(34.168 / 18.144 - 1.0)


@needs_new_cases
def test_gb200_segment_holds_the_ep_groups() -> None:
    """NeMo@7a8f1cc7bc's slurm_executor (scripts/performance/utils.py L114-120) asks Slurm for segments of the
    largest node count <= 18 that divides the job's nodes on 4-GPU nodes beyond 18 nodes: 32, 64 and 128 nodes give
    16-node segments, 64 GPUs of one NVL72 rack. EP 32 / 64 groups of consecutive ranks sit inside one segment, so the
    row's prediction on 64-GPU NVLink domains equals the catalog's 72-GPU one (and a 32-GPU domain, which would split
    the EP 64 groups, would not)."""
    segment = {nodes: next(c for c in range(18, 0, -1) if nodes % c == 0) for nodes in (32, 64, 128)}
    assert segment == {32: 16, 64: 16, 128: 16}
    vt = script_module("validate_training")
    case = next(c for c in load_yaml(NEW_CASES) if c["id"] == "dgxc2505_gb200_dsv3_bf16_512")
    assert case["parallelism"]["ep"] == 64 and 4 * segment[128] == 64
    base = vt.predict_new_case(case)
    orig = vt.cluster_overrides
    got = {}
    try:
        for span in (64, 32):
            vt.cluster_overrides = lambda c, n, s=span: orig(c, n) + [f"tiers.nvlink.span={s}"]
            got[span] = vt.predict_new_case(case).predicted
    finally:
        vt.cluster_overrides = orig
    # 1e-4, not exact: each micro-batch's loss all-reduce over the DP group (nemo1sync36,
    # docs/model.md#loss-dp-allreduce) crosses 64- and 72-GPU domains by a different hierarchy, 0.6 ms of
    # latency in 18.4 s; the EP groups' placement, which this test is about, moves the step by > 20% where it
    # splits them (span 32, below)
    assert got[64] == pytest.approx(base.predicted, rel=1e-4)
    assert got[32] > 1.2 * base.predicted
