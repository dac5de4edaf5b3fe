"""Issue 13: three Megatron-Core behaviours of the data-parallel sync.

1. Megatron-Core DDP's default gradient bucket, max(4e7, 1e6 x dp x cp) elements with --overlap-grad-reduce, one
   bucket per buffer without (NVIDIA/Megatron-LM@d98e8a64dd megatron/training/training.py resolve_ddp_bucket_size),
   and the importer's --ddp-bucket-size / --overlap-grad-reduce;
2. --fp8-param-gather: the distributed optimizer all-gathers (and holds) the layers' linear weights in FP8;
3. ZeRO-1/2's reduce-scatter and all-gather on the algorithms NCCL has for them (no tree).

Every expected value is counted by hand from the 4-layer model of tests/test_distopt.py, with every collective priced
at 1 ns per byte a rank sends on a ring (test_distopt._ring_priced)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scalemodel.choices import Algorithm
from scalemodel.cost import collectives as coll
from scalemodel.cost import memory
from scalemodel.engine import dp_comm
from scalemodel.engine.job import build_job
from scalemodel.errors import InputError
from scalemodel.specs import TrainingSpec, load_cluster
from scalemodel.specs.frameworks import read_strategy_file
from tests.test_distopt import TINY, _comp, _grid, _groups, _ring_priced

P = 99_886_080  # TINY's parameters (tests/test_distopt.py)
#: TINY's linear weights per layer: QKV 1024 x 3072 + O 1024 x 1024 + gated MLP 3 x 1024 x 4096
LINEAR_PER_LAYER = 1024 * 3072 + 1024 * 1024 + 3 * 1024 * 4096
assert LINEAR_PER_LAYER == 16_777_216


@pytest.fixture(scope="module")
def h100():  # type: ignore[no-untyped-def]
    return load_cluster("dgx-h100")


def _sync(job, g, monkeypatch, comp=None):  # type: ignore[no-untyped-def]
    calls = _ring_priced(monkeypatch)
    out = dp_comm._dp_comm(job, g, comp or _comp(), np.asarray([1.0]), _groups(job, g).data)
    return calls, out


# --- 1. Megatron's bucket ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("dp", "zero", "n_b"), [
    (8, "1", 3),   # max(4e7, 8e6) = 4e7 elements: ceil(99,886,080 / 4e7) = 3 buckets
    (64, "0", 2),  # max(4e7, 6.4e7) = 6.4e7: ceil(99,886,080 / 6.4e7) = 2
    (128, "0", 1),  # 1.28e8 > P: one bucket
])
def test_megatron_default_bucket_count(h100, monkeypatch, dp: int, zero: str, n_b: int) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=4.0))
    g = _grid(job, dp=dp, zero=zero, megatron_ddp=True)
    calls, out = _sync(job, g, monkeypatch)
    if zero == "1":  # fp32 gradients reduce-scattered, bf16 parameters gathered, in the same 3 buckets
        assert calls == [("reducescatter", pytest.approx(P * 4.0 / n_b, rel=1e-12), dp),
                         ("allgather", pytest.approx(P * 2.0 / n_b, rel=1e-12), dp)]
    else:
        assert calls == [("allreduce", pytest.approx(P * 4.0 / n_b, rel=1e-12), dp)]
    assert float(out["last_bucket"][0]) == pytest.approx(1.0 / n_b)
    # without the switch: DeepSpeed's 5e8 elements at ZeRO 1 (1 bucket), PyTorch DDP's 25 MiB at ZeRO 0: 6,553,600
    # fp32 elements, which TINY's 4 fc1 (8,388,608) and its embedding (32,768,000) exceed, each a bucket of its own,
    # and ceil(33,563,648 / 6,553,600) = 6 for its other tensors (dp_comm.bucket_count): 11, not
    # ceil(P x 4 / 26,214,400) = 16; the
    # last of them holds the word embedding, 32,768,000 of P elements (dp_comm.embedding_bucket_share), more than 1/11
    calls, out = _sync(job, _grid(job, dp=dp, zero=zero), monkeypatch)
    assert P - 4 * 8_388_608 - 32_768_000 == 33_563_648
    assert float(out["last_bucket"][0]) == pytest.approx(1.0 if zero == "1" else 32_768_000 / P)


def test_megatron_exposed_tail_by_hand(h100, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """dp 8, ZeRO 1, fp32 reduction, 3 buckets, 0.3 s of backward free, no --overlap-param-gather:
    RS = 7/8 x P x 4 ns = 0.34960128 s, AG = 7/8 x P x 2 ns = 0.17480064 s;
    exposed = max(RS - 0.3, RS / 3) + AG = max(0.04960128, 0.11653376) + 0.17480064 = 0.2913344 s.
    Without --overlap-grad-reduce Megatron makes one bucket per buffer even with --ddp-bucket-size, and nothing
    overlaps: RS + AG = 0.52440192 s."""
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=4.0))
    comp = _comp(f=0.1, b=0.3)
    g = _grid(job, zero="1", megatron_ddp=True)
    _, out = _sync(job, g, monkeypatch, comp)
    exposed = dp_comm._expose_param_gather(g, comp, out["grads"] * 1e-9, out["last_bucket"], out["param_gather"] * 1e-9)
    assert float(exposed[0]) == pytest.approx(0.2913344, rel=1e-9)
    g = _grid(job, zero="1", megatron_ddp=True, overlap=False, bucket_size=1e8)
    calls, out = _sync(job, g, monkeypatch, comp)
    assert [c[1] for c in calls] == [pytest.approx(P * 4.0), pytest.approx(P * 2.0)]  # one bucket each
    exposed = dp_comm._expose_param_gather(g, comp, out["grads"] * 1e-9, out["last_bucket"], out["param_gather"] * 1e-9)
    assert float(exposed[0]) == pytest.approx(0.52440192, rel=1e-9)


def test_user_bucket_overrides_megatron_default(h100, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """bucket_size 1e8 bytes of fp32 gradient = 2.5e7 elements: ceil(P / 2.5e7) = 4 buckets (with overlap), the last
    holding the 32,768,000-element word embedding (TINY's only tensor over 2.5e7), 0.328 of P > 1/4."""
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=4.0))
    _, out = _sync(job, _grid(job, zero="1", megatron_ddp=True, bucket_size=1e8), monkeypatch)
    assert float(out["last_bucket"][0]) == pytest.approx(32_768_000 / P)


def test_megatron_ddp_needs_zero_0_or_1() -> None:
    from scalemodel.specs import StrategySpec

    with pytest.raises(Exception, match="megatron_ddp"):
        StrategySpec(zero="3", megatron_ddp=True)._check()


# --- the importer ---------------------------------------------------------------------------------------------


def _read(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py {text}\n")
    return read_strategy_file(str(f))


def test_importer_reads_the_ddp_flags(tmp_path: Path) -> None:
    # --bf16 reduces in fp32: 5e7 elements x 4 bytes
    sf = _read(tmp_path, "--use-distributed-optimizer --overlap-grad-reduce --bf16 --ddp-bucket-size 50000000")
    assert sf.strategy["megatron_ddp"] is True and sf.strategy["overlap"] is True
    assert sf.strategy["bucket_size"] == pytest.approx(2e8)
    sf = _read(tmp_path, "--bf16 --grad-reduce-in-bf16 --ddp-bucket-size 50000000")
    assert sf.strategy["bucket_size"] == pytest.approx(1e8) and sf.strategy["overlap"] is False  # Megatron's default
    sf = _read(tmp_path, "--use-torch-fsdp2 --bf16")  # not Megatron's DDP
    assert "megatron_ddp" not in sf.strategy and "overlap" not in sf.strategy
    sf = _read(tmp_path, "--ddp-num-buckets 4")
    assert any("--ddp-num-buckets" in u for u in sf.unused)
    with pytest.raises(InputError, match="--ddp-bucket-size"):
        _read(tmp_path, "--ddp-bucket-size 0")


def test_importer_reads_fp8_param_gather(tmp_path: Path) -> None:
    sf = _read(tmp_path, "--use-distributed-optimizer --bf16 --fp8-format hybrid --fp8-param-gather")
    assert sf.strategy["fp8_param_gather"] is True and not any("fp8-param-gather" in u for u in sf.unused)
    with pytest.raises(InputError, match="fp8.param.gather"):  # Megatron asserts the distributed optimizer
        _read(tmp_path, "--bf16 --fp8-format hybrid --fp8-param-gather")


# --- 2. --fp8-param-gather ------------------------------------------------------------------------------------


def test_fp8_param_gather_bytes_by_hand(h100, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """4 layers x 16,777,216 linear weights = 67,108,864 elements gathered at 1 byte, the other
    99,886,080 - 67,108,864 = 32,777,216 (embedding 32,768,000, norms 9,216) at 2:
    AG = 67,108,864 + 2 x 32,777,216 = 132,663,296 bytes (against 2 P = 199,772,160); the gradients' RS is
    unchanged (P x 4)."""
    job = build_job(h100, TINY, TrainingSpec(precision="fp8", grad_bytes_per_param=4.0))
    calls, out = _sync(job, _grid(job, zero="1", fp8_param_gather=True), monkeypatch)
    assert calls == [("reducescatter", pytest.approx(P * 4.0, rel=1e-12), 8),
                     ("allgather", pytest.approx(132_663_296, rel=1e-12), 8)]
    assert float(out["param_gather"][0]) == pytest.approx(7 / 8 * 132_663_296, rel=1e-12)
    calls, _ = _sync(job, _grid(job, zero="1"), monkeypatch)
    assert calls[1] == ("allgather", pytest.approx(2.0 * P, rel=1e-12), 8)


def test_mxfp8_params_are_gathered_in_bf16(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """mxfp8: Megatron-Core all-gathers MXFP8 parameters in BF16 through the gradient buffer and quantizes after the
    gather (param_and_grad_buffer.py), so fp8_param_gather leaves the all-gather at 2 P bytes (delayed: 132,663,296)."""
    b200 = load_cluster("dgx-b200")
    for recipe, ag in (("mxfp8", 2.0 * P), ("delayed", 132_663_296)):
        job = build_job(b200, TINY, TrainingSpec(precision="fp8", fp8_recipe=recipe, grad_bytes_per_param=4.0))
        calls, _ = _sync(job, _grid(job, zero="1", fp8_param_gather=True), monkeypatch)
        assert calls[1] == ("allgather", pytest.approx(ag, rel=1e-12), 8)


def test_fp8_param_gather_memory_by_hand(h100) -> None:  # type: ignore[no-untyped-def]
    """ZeRO 1: the replicated 16-bit weights (2 P bytes) lose 1 byte for each of the 67,108,864 FP8 elements; the
    gradients and the optimizer states do not change."""
    job = build_job(h100, TINY, TrainingSpec(precision="fp8"))
    kw = dict(micro_batch=1, seq_len=2048, dp=8, zero_stage=1, weight_bytes=2.0, grad_bytes=2.0)
    base = memory.memory_per_gpu(job.shape, **kw)  # type: ignore[arg-type]
    fp8 = memory.memory_per_gpu(job.shape, fp8_params=True, **kw)  # type: ignore[arg-type]
    assert float(base.weights) == pytest.approx(2.0 * P)
    assert float(base.weights - fp8.weights) == pytest.approx(4 * LINEAR_PER_LAYER)
    assert float(fp8.gradients) == pytest.approx(float(base.gradients))
    assert float(fp8.optimizer) == pytest.approx(float(base.optimizer))
    z3 = memory.memory_per_gpu(job.shape, **{**kw, "zero_stage": 3})  # type: ignore[arg-type]
    z3_fp8 = memory.memory_per_gpu(job.shape, fp8_params=True, **{**kw, "zero_stage": 3})  # type: ignore[arg-type]
    assert float(z3_fp8.weights) == pytest.approx(float(z3.weights))  # not the ZeRO-3 path


def test_fp8_param_gather_needs_fp8_and_zero_1_or_2(h100) -> None:  # type: ignore[no-untyped-def]
    from scalemodel.specs import StrategySpec

    job = build_job(h100, TINY, TrainingSpec(precision="bf16"))
    with pytest.raises(InputError, match="fp8_param_gather"):
        _grid(job, zero="1", fp8_param_gather=True)
    with pytest.raises(Exception, match="fp8_param_gather"):
        StrategySpec(zero="3", fp8_param_gather=True)._check()
    StrategySpec(zero="fsdp", fp8_param_gather=True)._check()  # Megatron-FSDP


def test_megatron_fsdp_fp8_param_gather_prices_as_the_fp8_all_gather(h100, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """zero fsdp with fp8_param_gather: each of the 4 units gathers a quarter of the stage (the engine spreads the
    embedding over the units) at 2 bytes less 1 per linear weight, exactly as fsdp_fp8_all_gather:
    (2 x 99,886,080 - 4 x 16,777,216) / 4 = 33,165,824 bytes per unit (16-bit: 49,943,040)."""
    job = build_job(h100, TINY, TrainingSpec(precision="fp8"))
    sizes = {}
    for name in ("fp8_param_gather", "fsdp_fp8_all_gather"):
        calls, _ = _sync(job, _grid(job, zero="fsdp", **{name: True}), monkeypatch)
        sizes[name] = sorted({round(c[1]) for c in calls if c[0] == "allgather"})
    assert sizes["fp8_param_gather"] == sizes["fsdp_fp8_all_gather"] == [33_165_824]


# --- 3. NCCL's algorithms for the reduce-scatter and the all-gather ------------------------------------------


@pytest.mark.parametrize(("chosen", "used"), [
    ("auto", Algorithm.AUTO), ("tree", Algorithm.AUTO), ("ring", Algorithm.RING), ("rhd", Algorithm.RHD),
    ("hierarchical", Algorithm.HIERARCHICAL)])
def test_zero12_collectives_never_run_tree(h100, monkeypatch, chosen: str, used: Algorithm) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=4.0))
    seen: list[tuple[str, int]] = []

    def priced(op, size, group, algorithm=None):  # type: ignore[no-untyped-def]
        seen.append((op, int(np.max(algorithm)) if algorithm is not None else -1))
        return np.asarray(size, dtype=float) * 0.0

    monkeypatch.setattr(dp_comm, "_collective", priced)  # _dp_comm looks it up in dp_comm
    g = _grid(job, zero="1", algorithm=chosen)
    dp_comm._dp_comm(job, g, _comp(), np.asarray([1.0]), _groups(job, g).data)
    assert seen == [("reducescatter", int(used)), ("allgather", int(used))]


def test_tree_choice_prices_zero1_like_ring_on_a_multi_node_group(h100) -> None:  # type: ignore[no-untyped-def]
    """128 GPUs (16 DGX H100 nodes), ZeRO 1: NCCL has no tree reduce-scatter or all-gather, so asking for tree
    gives NCCL's own choice for them (ring on this cluster: no in-network reduction for RS/AG in the cost
    layer's NCCL family), whereas the all-reduce a tree choice prices is faster than ring here (the optimism this
    removes)."""
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=4.0))
    times = {}
    for alg in ("tree", "ring", "auto"):
        g = _grid(job, dp=128, zero="1", algorithm=alg)
        times[alg] = float(dp_comm._dp_comm(job, g, _comp(), np.asarray([1.0]), _groups(job, g).data)["grads"][0])
    assert times["tree"] == pytest.approx(times["auto"], rel=1e-12)
    assert times["tree"] == pytest.approx(times["ring"], rel=1e-12)
    group = _groups(job, g).data.sharding.dense
    as_allreduce = float(coll.group_time("allreduce", np.asarray(P * 3.0), group, algorithm="tree")[()])
    # 2.47 ms against 2.66 ms on this cluster since NCCL's per-channel tree caps (docs/model.md#nccl-tree-caps;
    # 2.01 ms before them): still the faster answer a tree choice would wrongly give ZeRO 1
    assert as_allreduce < 0.95 * times["tree"]


# --- the validation rule -------------------------------------------------------------------------------------


def test_validation_sets_megatron_fields_only_where_the_source_shows_them() -> None:
    """mb2511 (Megatron-Bridge 25.11): ZeRO 1 -> Megatron DDP, the 128 Mi-element bucket of its CommOverlapConfig
    (x 2 bytes of bf16 gradient = 268,435,456 bytes) and, with fp8, fp8_param_gather (its FP8-CS/MXFP8 presets);
    mlm24 (Megatron-LM): Megatron DDP only; mb2511's Megatron-FSDP fp8 rows: fp8_param_gather; others: nothing."""
    from conftest import script_module

    vt = script_module("validate_training")
    bridge = {"id": "mb2511_x", "source": "Megatron-Bridge"}
    mlm = {"id": "mlm24_x", "source": "Megatron-LM"}
    assert vt.megatron_options(bridge, "1", "fp8", 2.0) == {"megatron_ddp": True, "bucket_size": 268_435_456.0,
                                                           "fp8_param_gather": True}
    assert vt.megatron_options(bridge, "1", "bf16", 2.0) == {"megatron_ddp": True, "bucket_size": 268_435_456.0}
    assert vt.megatron_options(bridge, "fsdp", "fp8", 2.0) == {"fp8_param_gather": True}  # Megatron-FSDP
    assert vt.megatron_options(bridge, "fsdp", "bf16", 2.0) == {}
    assert vt.megatron_options(mlm, "1", "bf16", 4.0) == {"megatron_ddp": True}
    assert vt.megatron_options({"id": "mpt_x"}, "0", "bf16", 2.0) == {}
