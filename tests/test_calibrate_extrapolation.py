"""scripts/calibrate_extrapolation.py finds every published scaling series and derives each run's measured
step from the figure the source printed (the study itself takes a minute: run the script, not the test)."""

from __future__ import annotations

import pytest
from conftest import script_module


@pytest.fixture(scope="module")
def found():  # type: ignore[no-untyped-def]
    mod = script_module("calibrate_extrapolation")
    if mod.vt.CASES is None:
        pytest.skip("validation cases not found")
    series = mod.series(mod.nar21_cases() + mod.new_cases())
    return {name: (kind, [c.run for c in group]) for name, kind, group in series}


def test_every_series_is_found(found) -> None:  # type: ignore[no-untyped-def]
    gpus = {name: (kind, [r.gpus for r in runs]) for name, (kind, runs) in found.items()}
    assert gpus == {
        "nar21 dgx-a100 (32-3072)": ("model grows with GPUs", [32, 64, 128, 256, 512, 1024, 1536, 1920, 2520, 3072]),
        "mlm24 dgx-h100 (48-6144)": ("model grows with GPUs", [48, 96, 192, 384, 768, 1536, 2304, 3072, 6144]),
        "nemo2407_h100_gpt3_175b (128/512)": ("same model", [128, 512]),
        "mpt_h100_70b (256/512)": ("same model", [256, 512]),
        "mtnlg_530b (2240/2800/3360)": ("same model", [2240, 2800, 3360]),
        "nemotron4_15b_h100 (768/1536/2304)": ("same model", [768, 1536, 2304]),
        "maxtext tpu-v5p-pod (64-2048)": ("model grows with GPUs", [64, 256, 512, 512, 2048]),
        # Megatron-Bridge 25.11 tables, once interleaved uneven chunks made their 405B / Qwen3-235B rows expressible
        "mb2511 dgx-b200 (8-128)": ("model grows with GPUs", [8, 64, 128]),
        "mb2511 gb200-nvl72 (8-256)": ("model grows with GPUs", [8, 8, 64, 256]),
    }


def test_measured_steps_are_the_published_figures(found) -> None:  # type: ignore[no-untyped-def]
    # MT-NLG states iteration times (Smith et al. 2022, arXiv 2201.11990; validation/training_cases.yaml)
    assert [r.step_time_s for r in found["mtnlg_530b (2240/2800/3360)"][1]] == [60.1, 50.2, 44.4]
    # MPT-70B on 512 H100: 1007 tokens/s/GPU at a global batch of 4096 x 2048 tokens
    mpt = found["mpt_h100_70b (256/512)"][1][1]
    assert mpt.step_time_s == pytest.approx(4096 * 2048 / (1007 * 512), rel=1e-12)
