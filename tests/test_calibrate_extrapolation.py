"""scripts/calibrate_extrapolation.py finds every published scaling series and derives each run's measured
step from the figure the source printed (the study itself takes a minute: run the script, not the test)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from conftest import script_module, shared_once


@pytest.fixture(scope="module")
def groups():  # type: ignore[no-untyped-def]
    # the session's validator module first: the script's `import validate_training` is then that module, whose cached
    # validate_all() (every row priced, ~30 s of CPU) the script shares with test_validation.py and test_intervals.py.
    # The series (new_cases prices every row again, ~30 s more) are made once a test run (conftest.shared_once): under
    # pytest-xdist this module's tests are spread over the workers, and each built the fixture
    script_module("validate_training")
    mod = script_module("calibrate_extrapolation")
    if mod.vt.CASES is None:
        pytest.skip("validation cases not found")
    return shared_once("extrapolation-series", lambda: mod.series(mod.nar21_cases() + mod.new_cases()))


@pytest.fixture(scope="module")
def found(groups):  # type: ignore[no-untyped-def]
    return {name: (kind, [c.run for c in group]) for name, kind, group in groups}


def test_every_series_is_found(found) -> None:  # type: ignore[no-untyped-def]
    gpus = {name: (kind, [r.gpus for r in runs]) for name, (kind, runs) in found.items()}
    assert gpus == {
        "nar21 dgx-a100 (32-3072)": ("model grows with GPUs", [32, 64, 128, 256, 512, 1024, 1536, 1920, 2520, 3072]),
        "mlm24 dgx-h100 (48-6144)": ("model grows with GPUs", [48, 96, 192, 384, 768, 1536, 2304, 3072, 6144]),
        "nemo2407_h100_gpt3_175b (128/512)": ("same model", [128, 512]),
        "mpt_h100_70b (256/512)": ("same model", [256, 512]),
        "mtnlg_530b (2240/2800/3360)": ("same model", [2240, 2800, 3360]),
        "nemotron4_15b_h100 (768/1536/2304)": ("same model", [768, 1536, 2304]),
        # v5pdata37: the rest of MaxText's v5p table (one-slice 64B on 64 chips, 128B on 128, 1024B on 1024 chips; the
        # same 128B and 1024B scripts on two slice sizes make two same-model series)
        "maxtext tpu-v5p-pod (64-2048)": ("model grows with GPUs", [64, 64, 128, 256, 512, 512, 1024, 2048]),
        "maxtext_v5p_128b (128/256)": ("same model", [128, 256]),
        "maxtext_v5p_1024b (1024/2048)": ("same model", [1024, 2048]),
        # Megatron-Bridge 25.11 tables, once interleaved uneven chunks made their 405B / Qwen3-235B rows expressible;
        # B200 gains the DeepSeek-V3 MTP row (256 GPUs, 671B) and H100 is found at all once model size is the total
        # parameter count: by FLOPs per sequence DeepSeek-V3 (37B active, 4096 tokens) after Llama 3.1 405B and
        # Qwen3-30B-A3B (16 GPUs) after Llama 3 8B (8 GPUs, 8192 tokens) read as shrinking models
        "mb2511 dgx-b200 (8-256)": ("model grows with GPUs", [8, 64, 128, 256]),
        "mb2511 gb200-nvl72 (8-256)": ("model grows with GPUs", [8, 8, 64, 256]),
        "mb2511 dgx-h100 (8-1024)": ("model grows with GPUs", [8, 16, 64, 256, 1024]),
        # Megatron-Bridge 26.08 (round 3, validation/README.md): its four expressible GB200 rows, Qwen3-30B-A3B
        # (8 GPUs), GPT-OSS 120B (64), Qwen3-235B-A22B and DeepSeek-V3 (256 each): 30B < 120B < 235B < 671B parameters
        # + Nemotron 3 Super (64 GPUs, 123.6 B) on GB200 and GB300 once LatentMoE was priced (docs/model.md#latent-moe)
        # + Nemotron 3.5 Lightning (8 GPUs, 32.9 B with its MTP module) once listed21 recorded its recipe's Nano
        # shape (validation/README.md, the listed-rows audit)
        "mb2608 gb200-nvl72 (8-256)": ("model grows with GPUs", [8, 8, 64, 64, 256, 256]),
        # the same four models on GB300 once the catalog held it (gb300-nvl72): same GPU counts as the GB200 rows;
        # + Nemotron 3 Nano (8 GPUs, 31.6 B) once the model priced Mamba-2 hybrid patterns
        "mb2608 gb300-nvl72 (8-256)": ("model grows with GPUs", [8, 8, 64, 64, 256, 256]),
        # MLPerf v5.1's NVFP4 rows, compared since fp4a28 (FP8 attention under NVFP4, stochastic rounding off)
        # data31: Nebius' 4 x 8 B200 NVFP4 run joins its 2 x 8 one; hybrid32: Dell's 8-GPU run is another submitter's
        # (a series keys on the submitter: it was "mlpt51_b200_llama31_8b_8 (8/16/32)" with Dell's run first)
        # data40: Nebius' 1 x 8 B200 NVFP4 run (nebius_b200_n1) starts that series; named after its first id
        "mlpt51_b200_llama31_8b_8_nvfp4 (8/16/32)": ("same model", [8, 16, 32]),
        "mlpt51_gb200_llama31_405b_512 (512/2560/5120)": ("same model", [512, 2560, 5120]),
        # Megatron-Bridge 26.06 DGX-B300 rows once the catalog held b300 / dgx-b300: Qwen3-30B-A3B (8 GPUs), GPT-OSS
        # 120B (64), DeepSeek-V3 (256); the 26.04.01 B300 Qwen3-235B row is a series of one (source mb2604)
        "mb2606 dgx-b300 (8-256)": ("model grows with GPUs", [8, 8, 64, 64, 256]),  # + Nano (8), Super (64)
        # Megatron-Bridge 26.04 DGX-B200 (round 5): Qwen3-30B-A3B and Nemotron 3 Nano (8 GPUs), Nemotron 3 Super (64),
        # Qwen3-235B-A22B and DeepSeek-V3 (256): a series once the Super row made the 64-GPU step
        "mb2604 dgx-b200 (8-256)": ("model grows with GPUs", [8, 8, 64, 256, 256]),
        # round-2 cases (validation/README.md): the NeMo 24.07 H100 table with its Llama 2/3 rows (7B, 8B, 13B, 70B x2,
        # 175B x2, sizes never shrink as GPUs grow) and torchtitan's Llama 3.1 8B on 4 and 8 H200 nodes
        "nemo2407 dgx-h100 (8-512)": ("model grows with GPUs", [8, 8, 16, 64, 64, 128, 512]),
        "titan25_h200_llama31_8b_fsdp32 (32/64)": ("same model", [32, 64]),
        # nanotron25 (the Ultra-Scale Playbook heatmap): each model at 1 to 64 nodes, found once a model's identity is
        # its built workload rather than its recorded block, whose free-text note names each run; the 1B at 64 nodes
        # and the 80B at 32 are listed (degraded network), the 80B at 8 nodes is its GQA-8 model (a model of its own)
        "nanotron25_h100_1b (8/16/32/64/128/256)": ("same model", [8, 16, 32, 64, 128, 256]),
        "nanotron25_h100_3b (8/16/32/64/128/256/512)": ("same model", [8, 16, 32, 64, 128, 256, 512]),
        "nanotron25_h100_8b (8/16/32/64/128/256/512)": ("same model", [8, 16, 32, 64, 128, 256, 512]),
        "nanotron25_h100_80b (32/128/512)": ("same model", [32, 128, 512]),
        # MaxText Llama 2 7B on 1-16 A3 VMs (mtgpu24), a series once gcp-a3-high held the inter-VM network (net20)
        "mtgpu24_a3_llama2_7b (8/16/32/64/128)": ("same model", [8, 16, 32, 64, 128]),
        # data20: NVIDIA/dgxc-benchmarking's weak-scaling tables on DGX H100 (validation/README.md, dgxc25), one series
        # per model and precision; the Llama 3.1 405B series is its full-model columns (the 7 / 21 / 42-layer proxies
        # on 32-192 GPUs are other models)
        "dgxc25_h100_nemotron4_15b_bf16 (16/32/64/128/256/512/1024/2048)":
            ("same model", [16, 32, 64, 128, 256, 512, 1024, 2048]),
        "dgxc25_h100_nemotron4_15b_fp8 (16/32/64/128/256/512/1024/2048)":
            ("same model", [16, 32, 64, 128, 256, 512, 1024, 2048]),
        "dgxc25_h100_llama31_70b_bf16 (64/128/256/512/1024/2048)": ("same model", [64, 128, 256, 512, 1024, 2048]),
        "dgxc25_h100_llama31_70b_fp8 (64/128/256/512/1024/2048)": ("same model", [64, 128, 256, 512, 1024, 2048]),
        "dgxc25_h100_nemotron4_340b_bf16 (128/256/512/1024/2048)": ("same model", [128, 256, 512, 1024, 2048]),
        "dgxc25_h100_nemotron4_340b_fp8 (128/256/512/1024/2048)": ("same model", [128, 256, 512, 1024, 2048]),
        "dgxc25_h100_llama31_405b_bf16 (576/1152/2304)": ("same model", [576, 1152, 2304]),
        "dgxc25_h100_llama31_405b_fp8 (576/1152/2304)": ("same model", [576, 1152, 2304]),
        # maxtext21: the same repository's MaxText Llama 2 70B tables (mtdgxc24), FSDP 64-256 then FSDP 128 x DP
        "mtdgxc24_h100_llama2_70b_bf16 (64/128/256/512/1024/2048)": ("same model", [64, 128, 256, 512, 1024, 2048]),
        "mtdgxc24_h100_llama2_70b_fp8 (64/128/256/512/1024/2048)": ("same model", [64, 128, 256, 512, 1024, 2048]),
        # dgxc21: the same repository's Llama 3.1 8B and GPT-3 175B tables on DGX H100 (dgxc25) and the NeMo 2
        # rewrite's GB200 tables (dgxc2505: one series per model and precision, the 340B weak and strong rows together)
        # and its H100 rows (Nemotron-4 15B on 16, 340B on 256, Llama 3.1 405B on 512: a series of growing models)
        "dgxc25_h100_llama31_8b_bf16 (8/16/32/64/128)": ("same model", [8, 16, 32, 64, 128]),
        "dgxc25_h100_llama31_8b_fp8 (8/16/32/64/128)": ("same model", [8, 16, 32, 64, 128]),
        "dgxc25_h100_gpt3_175b_bf16 (128/256/512/1024/2048)": ("same model", [128, 256, 512, 1024, 2048]),
        "dgxc25_h100_gpt3_175b_fp8 (128/256/512/1024/2048)": ("same model", [128, 256, 512, 1024, 2048]),
        "dgxc2505_gb200_grok1_314b_bf16 (128/256/512)": ("same model", [128, 256, 512]),
        "dgxc2505_gb200_grok1_314b_fp8 (128/256/512)": ("same model", [128, 256, 512]),
        "dgxc2505_gb200_nemotron4_340b_bf16 (128/128/256/256/512/512)": ("same model", [128, 128, 256, 256, 512, 512]),
        "dgxc2505_gb200_nemotron4_340b_fp8 (128/128/256/256/512/512)": ("same model", [128, 128, 256, 256, 512, 512]),
        "dgxc2505_gb200_llama31_405b_bf16 (128/256/512)": ("same model", [128, 256, 512]),
        "dgxc2505_gb200_llama31_405b_fp8 (128/256/512)": ("same model", [128, 256, 512]),
        # data21c: DeepSeek-V3 671B on GB200 (128/256/512) and H100 (512 at PP 8, 1024 at PP 16) are same-model
        # series; the H100 Grok-1 314B row (512) follows Nemotron-4 340B (256) in the H100 table, so its model size
        # shrinks and the table is no longer a "model grows with GPUs" series (it was 16/256/512)
        "dgxc2505_gb200_dsv3_bf16 (128/256/512)": ("same model", [128, 256, 512]),
        "dgxc2505_h100_dsv3_bf16 (512/1024)": ("same model", [512, 1024]),
        # dgxc2504_23: the v25.04 H100 llama3.1 tables (dgxc2504): the 70B FP8 and full 405B columns are same-model
        # series; the 405B table's 8 / 30 / 62-layer proxies on 32 / 64 / 128 GPUs and its full model on 1024 / 2048
        # grow with GPUs
        "dgxc2504_h100_llama31_70b_fp8 (64/128/256/512/1024/2048)": ("same model", [64, 128, 256, 512, 1024, 2048]),
        "dgxc2504_h100_llama31_405b_bf16 (1024/2048)": ("same model", [1024, 2048]),
        "dgxc2504_h100_llama31_405b_fp8 (1024/2048)": ("same model", [1024, 2048]),
        "dgxc2504 dgx-h100 (32-2048)": ("model grows with GPUs", [32, 64, 128, 1024, 2048]),
        # tpu21: MaxText's 2023 TPU v5e table (mtv5e23), one series per model on 2-32 v5e-256 slices
        # (tpu-v5e-multislice; the one-slice row runs on tpu-v5e-pod, another cluster, so it starts no series)
        "mtv5e23_v5e_16b (512/1024/2048/4096/8192)": ("same model", [512, 1024, 2048, 4096, 8192]),
        "mtv5e23_v5e_32b (512/1024/2048/4096/8192)": ("same model", [512, 1024, 2048, 4096, 8192]),
        "mtv5e23_v5e_64b (512/1024/2048/4096/8192)": ("same model", [512, 1024, 2048, 4096, 8192]),
        "mtv5e23_v5e_128b (512/1024/2048/4096/8192)": ("same model", [512, 1024, 2048, 4096, 8192]),
        # MLPerf Training v5.1 (data24): Nebius' Llama 3.1 405B on 64 and 128 H200 nodes, the same GBS 1152
        "mlpt51_h200_llama31_405b (512/1024)": ("same model", [512, 1024]),
        # and Cisco's Llama 3.1 8B on 8 and 16 H100 nodes (TP 1 and TP 2, the same GBS 64)
        "mlpt51_h100_llama31_8b (64/128)": ("same model", [64, 128]),
        # data25: University of Florida's DGX B200 rows (8B on 1-32 nodes, 405B on 32 / 56; the table's two models
        # also make a growing series), NVIDIA's GB300 / GB200 8B at 72 and 512 GPUs, and Eos' H100 405B (v5.0)
        # hybrid32: a series keys on the submitter too, so data31's Dell 2 x XE9680L / XE9685L and Verda / Oracle
        # 8 x 8 FP8 runs (each one submitter's runs at one GPU count) no longer join University of Florida's (they did
        # at 8/16/16/16/32/64/64/64/128/256 and 8-448)
        "mlpt51_b200_llama31_8b (8/16/32/64/128/256)": ("same model", [8, 16, 32, 64, 128, 256]),
        "mlpt51_b200_llama31_405b (256/448)": ("same model", [256, 448]),
        "mlpt51 University-of-Florida dgx-b200 (8-448)": ("model grows with GPUs", [8, 16, 32, 64, 128, 256, 256, 448]),
        "mlpt51_gb300_llama31_8b (72/512)": ("same model", [72, 512]),
        "mlpt51_gb200_llama31_8b (72/512)": ("same model", [72, 512]),
        "mlpt50_h100_llama31_405b (512/2048/2432/2560/8192)": ("same model", [512, 2048, 2432, 2560, 8192]),
        # data27: Cisco's MLPerf v6.0 Llama 3.1 8B on 8 and 16 "Zeus" H100 nodes (TP 2, GBS 32 / 64)
        "mlpt60_h100_llama31_8b_64 (64/128)": ("same model", [64, 128]),  # named after its first id less its tail
        # data34: NeMo Automodel's DGX-H100 table (Nemotron 3 Nano on 8, Llama 3.1 70B on 64, DeepSeek-V3 on 256 GPUs:
        # one source and cluster, three models, so the script's rule reads it as a model growing with the GPUs)
        "automodel26 dgx-h100 (8-256)": ("model grows with GPUs", [8, 64, 256]),
        # data35: MLPerf v4.1 / v4.0 GPT-3 175B on Eos (NVIDIA's NeMo 1 implementation; Supermicro's v4.0 512-GPU run
        # is another submitter's, a series of its own)
        "mlpt41_h100_gpt3_175b (256/512)": ("same model", [256, 512]),
        "mlpt40_h100_gpt3_175b (512/10752/11616)": ("same model", [512, 10752, 11616]),
        # apexdp35: v3.1's Eos rows, compared since framework.fp8_param_gather false (BF16 parameter gathers)
        "mlpt31_h100_gpt3_175b (768/4096/6144/8192/10240/10752)": ("same model",
                                                                   [768, 4096, 6144, 8192, 10240, 10752]),
        # data36: the sequence-2048 rows of mosaicml/examples @9fa3ceb9a's A100 80GB / 40GB tables (one sweep, one
        # series per model and table)
        **{f"mpt_a100_40g_{m} (8/16/32/64/128)": ("same model", [8, 16, 32, 64, 128])
           for m in ("125m", "350m", "760m", "1b", "3b", "7b", "13b")},
        "mpt_a100_40g_30b (32/128)": ("same model", [32, 128]),
        "mpt_a100_40g_70b (64/128)": ("same model", [64, 128]),
        **{f"mpt_a100_80g_{m} (8/16/32/64)": ("same model", [8, 16, 32, 64])
           for m in ("125m", "350m", "760m", "1b", "3b", "7b", "13b", "30b")},
        "mpt_a100_80g_70b (32/64)": ("same model", [32, 64]),
        # data39: the NeMo Megatron launcher README's GPT-3 strong-scaling tables on DGX A100, 22.08 and 22.05 / 22.06
        "nemolaunch22_a100_gpt3_5b (8/16/32/64/128/256)": ("same model", [8, 16, 32, 64, 128, 256]),
        "nemolaunch22_a100_gpt3_175b (64/128/256/512/1024)": ("same model", [64, 128, 256, 512, 1024]),
        "nemolaunch2206_a100_gpt3_5b (8/16/40/72/80/144/160)": ("same model", [8, 16, 40, 72, 80, 144, 160]),
        "nemolaunch2206_a100_gpt3_175b (128/256/1024)": ("same model", [128, 256, 1024]),
        # data40: MLPerf v3.0 GPT-3 175B, NVIDIA's DGX H100 runs and NVIDIA+CoreWeave's HGX H100 runs (two submitters,
        # two series; the CoreWeave one named after its first id less its tail)
        "mlpt30_h100_gpt3_175b (512/768)": ("same model", [512, 768]),
        "mlpt30_h100_gpt3_175b_768 (768/1536/3584)": ("same model", [768, 1536, 3584]),
        # moedata41: Megatron-MoE-ModelZoo's two GB300 Qwen3-235B MXFP8 rows (16 nodes at 798dfb5, 64 nodes at
        # 020b813; different layouts, one model, one source and cluster)
        "moezoo26_gb300_qwen3_235b (64/256)": ("same model", [64, 256]),
        # tpu7x41: Ironwood's two 70B 8k BF16 recipe rows (irwd26, 64 and 256 chips)
        "irwd26_tpu7x_llama31_70b_64 (64/256)": ("same model", [64, 256]),
    }


def test_model_size_is_the_published_parameter_count(found) -> None:  # type: ignore[no-untyped-def]
    """The series rule orders a mixed table by total parameters (all experts): the sizes of the B200 table are the
    published 8.03B (Llama 3 8B model card), 235B (Qwen3-235B-A22B), 405B (Llama 3.1, 405.85B in its model card's
    safetensors count) and 671B (DeepSeek-V3 report, without its MTP module), within 0.5%."""
    mod = script_module("calibrate_extrapolation")
    sizes = [mod.model_size(r.workload) / 1e9 for r in found["mb2511 dgx-b200 (8-256)"][1]]
    assert sizes == [pytest.approx(x, rel=5e-3) for x in (8.03, 235.0, 405.85, 671.0)]
    # the rule itself: sizes never shrink along the GPU count, while FLOPs per sequence do (DeepSeek-V3 after 405B)
    assert sizes == sorted(sizes)


def test_measured_steps_are_the_published_figures(found) -> None:  # type: ignore[no-untyped-def]
    # MT-NLG states iteration times (Smith et al. 2022, arXiv 2201.11990; validation/training_cases.yaml)
    assert [r.step_time_s for r in found["mtnlg_530b (2240/2800/3360)"][1]] == [60.1, 50.2, 44.4]
    # MPT-70B on 512 H100: 1007 tokens/s/GPU at a global batch of 4096 x 2048 tokens
    mpt = found["mpt_h100_70b (256/512)"][1][1]
    assert mpt.step_time_s == pytest.approx(4096 * 2048 / (1007 * 512), rel=1e-12)


def test_two_submitters_never_share_a_series(groups) -> None:  # type: ignore[no-untyped-def]
    """MLPerf prints several submitters' runs under one source; each series is one submitter's (data31 put Dell's,
    Verda's and Oracle's B200 runs in University of Florida's series)."""
    for name, _kind, group in groups:
        assert len({c.submitter for c in group}) == 1, name
    named = {c.submitter for _, _, group in groups for c in group if c.run.label.startswith("mlpt")}
    assert {"University-of-Florida", "Nebius", "NVIDIA", "Cisco"} <= named


def test_submitter_is_the_results_directory() -> None:
    mod = script_module("calibrate_extrapolation")
    uf = ("MLPerf Training v5.1, closed division, University of Florida llama31_8b on hpg.dgxb200x8.n1 (1 x 8 B200): "
          "mlcommons/training_results_v5.1 @441d65f4 University-of-Florida/results/hpg.dgxb200x8.n1/llama31_8b/")
    fork = ("MLPerf Training v6.0, closed division, Cisco llama31_8b on Zeus_8xH100_SXM_80GB, read in the fork "
            "Richardyu114/training_results_v6.0 @eabf23a0 (...): Cisco/results/Zeus_8xH100_SXM_80GB/llama31_8b/")
    assert mod.submitter({"source": uf}) == "University-of-Florida"
    assert mod.submitter({"source": fork}) == "Cisco"
    assert mod.submitter({"source": "Narayanan et al. 2021, Table 1"}) == ""


def test_series_splits_by_submitter() -> None:
    """Four runs of one model on one hardware from one source, two by each of two submitters at 8 and 16 GPUs: two
    same-model series of two runs, not one of four (8/8/16/16)."""
    mod = script_module("calibrate_extrapolation")

    def case(label: str, gpus: int, who: str):  # type: ignore[no-untyped-def]
        run = SimpleNamespace(label=label, gpus=gpus)
        return mod.Case(run, "mlpt51", "dgx-b200  fp8", "llama31_8b", 8.03e9, who)  # type: ignore[arg-type]

    cases = [case("a_8", 8, "A"), case("b_8", 8, "B"), case("a_16", 16, "A"), case("b_16", 16, "B")]
    got = {name: (kind, [c.run.label for c in group]) for name, kind, group in mod.series(cases)}
    assert got == {"a (8/16)": ("same model", ["a_8", "a_16"]), "b (8/16)": ("same model", ["b_8", "b_16"])}
