"""FSDP without reshard after forward and with a float8 all-gather (strategy fields fsdp_reshard_after_forward and
fsdp_fp8_all_gather): bytes per micro-batch, exposed time and memory against values worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scalemodel.cost.memory import memory_per_gpu
from scalemodel.cost.placement import parallel_groups
from scalemodel.cost.transformer import shape
from scalemodel.engine import dp_comm
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import dp_exposed_floor, evaluate
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster
from scalemodel.specs.frameworks import read_strategy_file
from scalemodel.specs.workload import TransformerWorkload

# A 4-layer Llama-style model: h = 1024, 8 heads (d = 128, no GQA), gated MLP f = 4096, RMSNorm, no biases,
# tied 32,000-token embedding. By hand, per layer:
#   attention  qkv 1024 x 3072 + o 1024 x 1024             = 4,194,304
#   MLP        3 x 1024 x 4096                              = 12,582,912
#   norms      2 x 1024                                     = 2,048
# model: 4 layers + embedding 32,000 x 1024 + final norm 1024
ATTN, MLP, NORMS = 1024 * 3072 + 1024 * 1024, 3 * 1024 * 4096, 2 * 1024
LAYER = ATTN + MLP + NORMS
P = 4 * LAYER + 32_000 * 1024 + 1024  # 99,886,080
LINEAR = 4 * (ATTN + MLP)  # what torchao's Float8Linear casts: every nn.Linear weight of the 4 layers
L = 4
TINY = TransformerWorkload(name="tiny-llama", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000,
                           seq_len=2048, gated_mlp=True, biases=False, tied_embeddings=True, dropout=False)
SHAPE = shape(layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000, gated_mlp=True, biases=False,
              tied_embeddings=True, dropout=False)


@pytest.fixture(scope="module")
def h100():  # type: ignore[no-untyped-def]
    return load_cluster("dgx-h100")


def _grid(job, **strategy):  # type: ignore[no-untyped-def]
    st = StrategySpec(dp=8, zero="fsdp", **strategy)
    return grid_from_strategy(st, TrainingSpec(global_batch=8, precision=job.precision), 8, job)


def _dp_traffic(job, g, monkeypatch, *, per_byte: float, f: float = 0.0, b: float = 0.0):  # type: ignore[no-untyped-def]
    """_dp_comm with every collective priced at ``per_byte`` seconds a byte (so the result reads in bytes when
    per_byte = 1), one micro-batch, one unit's free forward/backward compute f and b; records the calls."""
    calls: list[tuple[str, float]] = []

    def priced(op, size, group, algorithm=None):  # type: ignore[no-untyped-def]
        calls.append((op, float(np.max(size))))
        return np.asarray(size, dtype=float) * per_byte

    monkeypatch.setattr(dp_comm, "_collective", priced)  # _dp_comm looks it up in dp_comm
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    comp = {"layers_per_stage": np.asarray([float(L)]), "forward_free": np.asarray([L * f]),
            "backward_free": np.asarray([L * b])}
    out = dp_comm._dp_comm(job, g, comp, np.asarray([1.0]), groups.data)
    return out, calls


def test_the_model_is_the_one_worked_out_by_hand(h100) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec())
    assert job.params == P and job.expert_params == 0


@pytest.mark.parametrize(("reshard", "fp8", "precision"), [
    (True, False, "bf16"), (False, False, "bf16"), (True, True, "fp8"), (False, True, "fp8")])
def test_bytes_gathered_and_reduced_per_micro_batch(h100, monkeypatch, reshard, fp8, precision) -> None:  # type: ignore[no-untyped-def]
    """dp = 8, tp = pp = 1, bf16 gradients: one unit gathers 2 P / L bytes (float8 linear weights: (2 P - LINEAR)
    / L) and reduce-scatters 2 P / L. Resharded: 2L - 1 gathers (the last unit stays gathered); kept: L."""
    job = build_job(h100, TINY, TrainingSpec(precision=precision, grad_bytes_per_param=2))
    g = _grid(job, fsdp_reshard_after_forward=reshard, fsdp_fp8_all_gather=fp8)
    out, calls = _dp_traffic(job, g, monkeypatch, per_byte=1.0)
    ag_unit = (2 * P - LINEAR) / L if fp8 else 2 * P / L
    rs_unit = 2 * P / L
    assert [size for op, size in calls if op == "allgather"] == [pytest.approx(ag_unit, rel=1e-12)]
    assert pytest.approx(rs_unit, rel=1e-12) in [size for op, size in calls if op == "reducescatter"]
    gathers = (2 * L - 1) if reshard else L
    assert float(out["gathers"][0]) == pytest.approx(gathers * ag_unit + L * rs_unit, rel=1e-12)
    # by hand: 549,373,440 / 399,544,320 / 431,932,928 / 332,435,456 bytes
    expected = {(True, False): 549_373_440, (False, False): 399_544_320, (True, True): 431_932_928,
                (False, True): 332_435_456}[(reshard, fp8)]
    assert float(out["gathers"][0]) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("reshard", [True, False])
def test_exposed_time_by_hand(h100, monkeypatch, reshard) -> None:  # type: ignore[no-untyped-def]
    """At 1 GB/s every unit's gather and reduce-scatter take AG = RS = 2 P / L / 1e9 = 49.94304 ms; with f = 30 ms
    and b = 60 ms a unit:
      resharded: AG + 3 max(0, AG - f) + 3 max(0, AG + RS - b) + RS = 99.88608 + 59.82912 + 119.65824 ms
      kept:      AG + 3 max(0, AG - f) + 3 max(0, RS - b) + RS      = 99.88608 + 59.82912 + 0 ms."""
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=2))
    g = _grid(job, fsdp_reshard_after_forward=reshard)
    out, _ = _dp_traffic(job, g, monkeypatch, per_byte=1e-9, f=0.030, b=0.060)
    expected = 0.27937344 if reshard else 0.1597152
    assert float(out["gathers_exposed"][0]) == pytest.approx(expected, rel=1e-9)
    g_off = _grid(job, fsdp_reshard_after_forward=reshard, overlap=False)
    off, _ = _dp_traffic(job, g_off, monkeypatch, per_byte=1e-9, f=0.030, b=0.060)
    assert float(off["gathers_exposed"][0]) == pytest.approx(float(out["gathers"][0]), rel=1e-12)  # all exposed


@pytest.mark.parametrize("model_args", [dict(), dict(precision="fp8")])
def test_exposed_traffic_never_below_the_floor(h100, model_args) -> None:  # type: ignore[no-untyped-def]
    """The planner's floor (dp_exposed_floor) stays under evaluate's exposed dp traffic, for the kept
    parameters and the float8 gather, every algorithm and overlap choice, and is not vacuous."""
    job = build_job(h100, TINY, TrainingSpec(global_batch=64, **model_args))
    fp8 = model_args.get("precision") == "fp8"
    for reshard in (True, False):
        for overlap in (True, False):
            for alg in ("auto", "ring", "tree"):
                st = StrategySpec(dp=8, zero="fsdp", fsdp_reshard_after_forward=reshard, fsdp_fp8_all_gather=fp8,
                                  overlap=overlap, algorithm=alg)
                g = grid_from_strategy(st, TrainingSpec(global_batch=64, **model_args), 8, job)
                res = evaluate(job, g)
                floor = float(dp_exposed_floor(job, g)[0])
                dp = float(np.asarray(res.breakdown["dp_comm"]).ravel()[0])
                assert 0 < floor <= dp * (1 + 1e-12)


def test_keeping_the_parameters_gathers_less_and_holds_the_stage(h100) -> None:  # type: ignore[no-untyped-def]
    """Same job: no reshard moves fewer bytes (less or equal dp time) and holds more memory."""
    job = build_job(h100, TINY, TrainingSpec(global_batch=64))
    res = {r: evaluate(job, _grid(job, fsdp_reshard_after_forward=r)) for r in (True, False)}
    # dp_comm is step - local - straggler: here both are the same exposed time up to that subtraction's rounding
    # (4e-19 s apart once the optimizer step's weight copy reads the fp32 master)
    assert float(res[False].breakdown["dp_comm"][0]) <= float(res[True].breakdown["dp_comm"][0]) * (1 + 1e-12)
    # by hand: the 4 layers + embedding held at once instead of 2 layers, 2 bytes each, dp = 8 sharding aside
    grow = float(res[False].memory["weights"].ravel()[0] - res[True].memory["weights"].ravel()[0])
    assert grow == pytest.approx(2 * (P - 2 * LAYER), rel=1e-12)


def test_memory_holds_the_unsharded_stage_by_hand() -> None:
    """Weights, dp = 8: resharded 2 P/8 + 2 (2 layers); kept 2 P/8 + 2 P (every unit gathered at once); the float8
    gather keeps 1 byte of each gathered linear weight (2 layers' worth resharded, all 4 layers' kept)."""
    kw = dict(micro_batch=1, seq_len=2048, dp=8, zero_stage="fsdp")
    base = memory_per_gpu(SHAPE, **kw)
    kept = memory_per_gpu(SHAPE, **kw, reshard_after_forward=False)
    fp8 = memory_per_gpu(SHAPE, **kw, fp8_gather=True)
    both = memory_per_gpu(SHAPE, **kw, reshard_after_forward=False, fp8_gather=True)
    assert float(base.weights) == pytest.approx(2 * P / 8 + 2 * 2 * LAYER, rel=1e-12)
    assert float(kept.weights) == pytest.approx(2 * P / 8 + 2 * P, rel=1e-12)
    # kept - resharded = 2 P - 2 x 2 LAYER = 2 x 99,886,080 - 4 x 16,779,264 (LAYER = 4,194,304 attention +
    # 12,582,912 MLP + 2,048 norms) = 199,772,160 - 67,117,056 = 132,655,104 bytes
    assert float(kept.weights - base.weights) == pytest.approx(132_655_104, rel=1e-12)
    assert float(base.weights - fp8.weights) == pytest.approx(2 * (ATTN + MLP), rel=1e-12)
    assert float(kept.weights - both.weights) == pytest.approx(LINEAR, rel=1e-12)
    assert float(kept.activations) == float(base.activations)
    zero2 = dict(kw, zero_stage=2)  # nothing gathered without sharded parameters
    assert float(memory_per_gpu(SHAPE, **zero2, reshard_after_forward=False).weights) == float(
        memory_per_gpu(SHAPE, **zero2).weights)


def test_defaults_change_nothing(h100) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec(global_batch=64))
    default = _grid(job)
    explicit = _grid(job, fsdp_reshard_after_forward=True, fsdp_fp8_all_gather=False)
    a, b = evaluate(job, default), evaluate(job, explicit)
    assert float(a.step_time[0]) == float(b.step_time[0])
    assert float(a.memory["total"][0]) == float(b.memory["total"][0])
    d = default.describe(0)
    assert d["fsdp_reshard_after_forward"] is True and d["fsdp_fp8_all_gather"] is False


def test_the_fields_need_sharded_parameters_and_fp8() -> None:
    with pytest.raises(InputError, match="fsdp_reshard_after_forward"):
        StrategySpec(fsdp_reshard_after_forward=False)
    with pytest.raises(InputError, match="fsdp_reshard_after_forward"):
        StrategySpec(zero="2", fsdp_reshard_after_forward=False)
    for zero in ("3", "fsdp", "hsdp"):
        StrategySpec(zero=zero, fsdp_reshard_after_forward=False)
    with pytest.raises(InputError, match="fsdp_fp8_all_gather"):
        StrategySpec(zero="3", fsdp_fp8_all_gather=True)  # torchao's float8 gather is an FSDP2 hook
    StrategySpec(zero="hsdp", fsdp_fp8_all_gather=True)


def test_fp8_gather_needs_precision_fp8(h100) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec())
    with pytest.raises(InputError, match="precision is bf16"):
        _grid(job, fsdp_fp8_all_gather=True)


def test_cli_predict_and_plan_honour_the_fields(cli) -> None:  # type: ignore[no-untyped-def]
    common = ["-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--json"]
    base = json.loads(cli("predict", *common, "--zero", "fsdp").out)
    r = cli("predict", *common, "--zero", "fsdp", "--set", "strategy.fsdp_reshard_after_forward=false")
    assert r.code == 0, r.err
    kept = json.loads(r.out)
    assert kept["strategy"]["fsdp_reshard_after_forward"] is False
    assert kept["memory"]["per_gpu_bytes"] > base["memory"]["per_gpu_bytes"]
    assert kept["breakdown_s"]["dp_comm"] <= base["breakdown_s"]["dp_comm"]
    r = cli("predict", *common, "--set", "strategy.fsdp_reshard_after_forward=false")
    assert r.code == 2 and r.err.startswith("error: --set strategy.fsdp_reshard_after_forward")
    assert "Traceback" not in r.err
    r = cli("predict", *common, "--zero", "fsdp", "--set", "strategy.fsdp_fp8_all_gather=true")
    assert r.code == 2 and "--precision fp8" in r.err
    r = cli("plan", *common, "--top", "2", "--set", "strategy.zero=fsdp", "--set",
            "strategy.fsdp_reshard_after_forward=false", "--constraint", "tp<=2,pp=1")
    assert r.code == 0, r.err
    plans = json.loads(r.out)["ranked"]
    assert plans and all(p["strategy"]["fsdp_reshard_after_forward"] is False for p in plans)
    r = cli("plan", *common, "--set", "strategy.zero=fsdp", "--set", "strategy.fsdp_fp8_all_gather=true")
    assert r.code == 2 and "--precision fp8" in r.err


def _toml(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "titan.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(("policy", "pp", "expected"), [
    (None, 1, None), (None, 2, False), ('"default"', 2, False), ('"always"', 2, None), ('"never"', 1, False)])
def test_torchtitan_reshard_policy(tmp_path, policy, pp, expected) -> None:  # type: ignore[no-untyped-def]
    """torchtitan get_fsdp_reshard_after_forward_policy: always -> True, never -> False, default -> not pp_enabled."""
    line = f"fsdp_reshard_after_forward = {policy}\n" if policy else ""
    sf = read_strategy_file(_toml(tmp_path, f"[parallelism]\ndata_parallel_shard_degree = -1\n"
                                            f"pipeline_parallel_degree = {pp}\n{line}"))
    assert sf.strategy.get("fsdp_reshard_after_forward") is expected


def test_torchtitan_reshard_policy_without_sharding_and_bad_values(tmp_path) -> None:  # type: ignore[no-untyped-def]
    sf = read_strategy_file(_toml(tmp_path, "[parallelism]\ndata_parallel_shard_degree = 1\n"
                                            "pipeline_parallel_degree = 2\n"))
    assert "fsdp_reshard_after_forward" not in sf.strategy  # no FSDP: nothing to reshard
    with pytest.raises(InputError, match="fsdp_reshard_after_forward"):
        read_strategy_file(_toml(tmp_path, '[parallelism]\nfsdp_reshard_after_forward = "sometimes"\n'))


@pytest.mark.parametrize(("text", "expected"), [
    # torchtitan 9dec370 (llama3_405b.toml): [float8] enable_float8_linear
    ("[float8]\nenable_float8_linear = true\nenable_fsdp_float8_all_gather = true\n", True),
    # converters era: [model] converters = "float8" with the [float8] table
    ('[model]\nconverters = "float8"\n[float8]\nenable_fsdp_float8_all_gather = true\n', True),
    ('[model]\nconverters = ["quantize.linear.float8"]\n[quantize.linear.float8]\n'
     'enable_fsdp_float8_all_gather = true\n', True),
    # the [float8] table without the conversion (tests/data/frameworks/torchtitan_llama3_8b.toml's form)
    ("[float8]\nenable_fsdp_float8_all_gather = true\n", None),
    ('[model]\nconverters = "float8"\n[float8]\nenable_fsdp_float8_all_gather = false\n', None),
    # rowwise: torchtitan refuses the float8 all-gather with a recipe
    ('[model]\nconverters = "float8"\n[float8]\nenable_fsdp_float8_all_gather = true\nrecipe_name = "rowwise"\n',
     None),
])
def test_torchtitan_float8_all_gather(tmp_path, text, expected) -> None:  # type: ignore[no-untyped-def]
    sf = read_strategy_file(_toml(tmp_path, text + "[parallelism]\ndata_parallel_shard_degree = -1\n"))
    assert sf.strategy.get("fsdp_fp8_all_gather") is expected


@pytest.mark.parametrize(("recipe_line", "recipe"), [
    ("", "tensorwise"),  # torchao's Float8LinearConfig(): per-tensor dynamic scaling
    ('recipe_name = "tensorwise"\n', "tensorwise"),
    ('recipe_name = "rowwise"\n', "rowwise"),
    ('recipe_name = "rowwise_with_gw_hp"\n', "rowwise_with_gw_hp"),
])
def test_torchtitan_float8_hint_names_the_recipe(tmp_path, recipe_line, recipe) -> None:  # type: ignore[no-untyped-def]
    """A torchtitan float8 TOML's unused-setting hint names torchao's recipe as training.fp8_recipe: --precision fp8
    alone prices Megatron-Core's default, delayed scaling (specs.training.low_precision_recipe), not the file's."""
    sf = read_strategy_file(_toml(tmp_path, '[model]\nconverters = "float8"\n[float8]\n' + recipe_line))
    hint = next(u for u in sf.unused if u.startswith("[float8]"))
    assert f"--set training.fp8_recipe={recipe} " in hint


@pytest.mark.parametrize(("layer_impl", "precision", "recipe", "fp8"), [
    ("xla", "fp8", "delayed", True), ("xla", "fp8", "tensorwise", True), ("xla", "bf16", None, False),
    ("megatron_te", "fp8", "delayed", False), ("xla", "fp8", "blockwise", False)])
def test_xla_fp8_gathers_the_linear_weights_in_float8(h100, monkeypatch, layer_impl, precision, recipe, fp8) -> None:  # type: ignore[no-untyped-def]
    """An XLA-compiled fp8 layer (MaxText's Flax Fp8DotGeneralOp, per-tensor scales) has its FSDP weight gather
    moved onto the E4M3 data by XLA (gemm_rewriter's all-gather in the FP8 pattern, the collective quantizer;
    layer_compute.fsdp_fp8_gather) without fsdp_fp8_all_gather: one unit gathers (2 P - LINEAR) / L =
    (199,772,160 - 67,108,864) / 4 = 33,165,824 bytes; a bf16 XLA run, a Transformer Engine layer without the
    flag and a block-scaled recipe gather 2 P / L = 49,943,040."""
    fp8_recipe = {"fp8_recipe": recipe} if recipe else {}
    job = build_job(h100, TINY, TrainingSpec(precision=precision, grad_bytes_per_param=2, **fp8_recipe))
    g = grid_from_strategy(StrategySpec(dp=8, zero="fsdp", layer_impl=layer_impl),
                           TrainingSpec(global_batch=8, precision=precision, **fp8_recipe), 8, job)
    _, calls = _dp_traffic(job, g, monkeypatch, per_byte=1.0)
    expected = 33_165_824 if fp8 else 49_943_040
    assert [size for op, size in calls if op == "allgather"] == [pytest.approx(expected, rel=1e-12)]
    assert pytest.approx(49_943_040, rel=1e-12) in [size for op, size in calls if op == "reducescatter"]


def test_xla_fp8_gathers_stay_16_bit_on_a_tpu(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The FP8 gather of an XLA fp8 layer rests on XLA's GPU compiler (gemm_rewriter's FP8 pattern and the
    collective quantizer in gpu_compiler.cc's collective pipeline) and on MaxText's Fp8Quantization, "Fp8
    quantization for NVIDIA GPUs" (AI-Hypercomputer/maxtext@9551c2ade MaxText/layers/quantizations.py line 194). A
    TPU compiles through its own (unpublished) passes: its gather stays 16-bit, 2 P / L = 199,772,160 / 4 =
    49,943,040 bytes a unit, as a bf16 run's."""
    tpu = load_cluster("tpu-v5p-pod")
    job = build_job(tpu, TINY, TrainingSpec(precision="fp8", grad_bytes_per_param=2, fp8_recipe="delayed"))
    g = grid_from_strategy(StrategySpec(dp=8, zero="fsdp", layer_impl="xla"),
                           TrainingSpec(global_batch=8, precision="fp8", fp8_recipe="delayed"), 8, job)
    _, calls = _dp_traffic(job, g, monkeypatch, per_byte=1.0)
    assert [size for op, size in calls if op == "allgather"] == [pytest.approx(2 * P / L, rel=1e-12)]
    assert 2 * P / L == 49_943_040
