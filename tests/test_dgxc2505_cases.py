"""The dgxc2505 rows (NVIDIA/dgxc-benchmarking v25.05 on NeMo 25.04) priced with the layout their release states.

Grok-1 314B on GB200 (grok1/README.md "Grok1 314b BF16 / FP8"): the README's layout table prints TP 4, EP 8, **ETP 4**
at every tag that prints these step times (v25.05 @68eaf7e to v25.05.05), and launch.sh's gb200 branch passes
``ET=${ET:-4}`` as ``-et 4`` from v25.05.01 (@85d9284) on, beside the unchanged figures; only v25.05's launch.sh passed
``-et 8``. NeMo@7a8f1cc7bc scripts/performance/utils.py get_user_configs keeps the CLI value (no gb200 CSV row for
grok1) and set_primary_perf_configs sets ``strategy.expert_tensor_parallel_size`` from it.
"""

from __future__ import annotations

import pytest
from conftest import script_module, training_cases

GROK = [f"dgxc2505_gb200_grok1_314b_{p}_{g}" for p in ("bf16", "fp8") for g in (128, 256, 512)]


@pytest.mark.parametrize("cid", GROK)
def test_grok1_gb200_rows_run_expert_tensor_parallel_4(cid: str) -> None:
    """ETP 4 = TP 4: the expert layers shard each expert's FFN over the same 4 GPUs as the attention's TP group."""
    case = training_cases()[cid]
    vt = script_module("validate_training")
    r = vt.predict_new_case(case)
    assert r.settings["tp"] == 4 and r.settings["ep"] == 8
    assert r.settings["etp"] == 4
    assert "expert tensor parallel 4" in case["parallelism"]["note"]
