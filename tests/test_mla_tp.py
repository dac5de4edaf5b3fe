"""Multi-head latent attention's tensor-parallel all-gathers with sequence parallelism (docs/model.md#mla-tp), worked
out by hand from Megatron-Core's MLASelfAttention: duplicated down-projections (NVIDIA/Megatron-LM@720c8b40d8,
core_v0.14.0, and later) gather the up-projections' inputs and the RoPE key, r_q + r_kv + d_rope a token;
column-parallel ones (1c425a8313 through core_v0.13.x, the Megatron-LM 7094270c6f NeMo 25.04 runs among them) gather
each down-projection's h-wide input and its output again, 2h + 2r_q + 2r_kv + d_rope, each gather its own collective.
An ordinary attention block gathers h. The times are the collectives model's for those bytes on the placed TP group
(the primitive, tested in tests/test_collectives*.py)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost.placement import parallel_groups, place
from scalemodel.cost.transformer import mla_down_proj_gathers, mla_up_proj_gathers, shape
from scalemodel.engine import model_parallel_comm
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.predict import predict
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec
from scalemodel.specs.workload import MLASpec, MoESpec

# DeepSeek-V3's attention (arXiv 2412.19437 §4.2): h 7168, 128 heads, r_q 1536, r_kv 512, d_rope 64
DSV3 = shape(layers=61, hidden=7168, heads=128, ffn_hidden=18432, vocab=129_280, kv_lora_rank=512, q_lora_rank=1536,
             qk_rope_head_dim=64, head_dim=192, v_head_dim=128)
# DeepSeek-V2-Lite's (arXiv 2405.04434 appendix): full-rank Q (r_q 0), h 2048, r_kv 512, d_rope 64
V2_LITE = shape(layers=27, hidden=2048, heads=16, ffn_hidden=10944, vocab=102_400, kv_lora_rank=512, q_lora_rank=0,
                qk_rope_head_dim=64, head_dim=192, v_head_dim=128)
LLAMA = shape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=128_256)


def test_gather_widths_by_hand() -> None:
    def widths(sh, column=None):  # type: ignore[no-untyped-def]
        got = mla_up_proj_gathers(sh) if column is None else mla_down_proj_gathers(sh, column)
        return [float(np.ravel(w)[0]) for w in got]

    # DeepSeek-V3: the up-projections' r_q, r_kv = 1536, 512 in both builds; duplicated adds d_rope (2112 a token),
    # column h, r_q, h, r_kv + d_rope (2 x 7168 + 2 x 1536 + 2 x 512 + 64 = 18,496)
    assert widths(DSV3) == [1536, 512]
    assert widths(DSV3, False) == [0, 0, 0, 64]
    assert widths(DSV3, True) == [7168, 1536, 7168, 576] and sum(widths(DSV3, True) + widths(DSV3)) == 18_496
    # full-rank Q: linear_q_proj gathers h in both (the up-projection's own); column adds kv_down's h and the KV latent
    assert widths(V2_LITE) == [2048, 512]
    assert widths(V2_LITE, False) == [0, 0, 0, 64]
    assert widths(V2_LITE, True) == [0, 0, 2048, 576]
    # no MLA: none of MLA's gathers, whatever the flag (the fused QKV's one h-wide gather is the count's)
    assert widths(LLAMA) == [0, 0] and widths(LLAMA, False) == widths(LLAMA, True) == [0, 0, 0, 0]


H, S, LAYERS = 1024, 2048, 4
MLA = MLASpec(kv_lora_rank=128, q_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)


def _parts(mla: MLASpec | None, moe: bool = True, **strategy):  # type: ignore[no-untyped-def]
    wl = TransformerWorkload(name="mla", layers=LAYERS, hidden=H, heads=8, ffn_hidden=4096, gated_mlp=True,
                             vocab=32_000, seq_len=S, tied_embeddings=False, mla=mla,
                             moe=MoESpec(experts=8, top_k=2, ffn_hidden=512) if moe else None)
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", seq_len=S, moe_rank_imbalance=1.0)
    job = build_job(load_cluster("dgx-h100"), wl, tr)
    st = StrategySpec(**strategy)
    g = grid_from_strategy(st, tr, st.tp * st.pp * (st.dp or 1), job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    return job, model_parallel_comm._mp_collectives(job, g, groups)


def _ag(nbytes: float, ranks: int, job) -> float:  # type: ignore[no-untyped-def]
    return float(coll.group_time("allgather", np.asarray(nbytes), place(float(ranks), 1.0, job.network)))


@pytest.mark.parametrize("column", [False, True])
def test_attention_gather_beyond_the_block_pair_by_hand(column: bool) -> None:
    """tp 4 with SP, b 1 x s 2048 tokens, bf16: the block pair (c['tp']) gathers h = 1024 a token in one all-gather;
    MLA's attention block runs its own all-gathers instead, each its own NCCL collective (its own launch and ramp):
    duplicated, the two up-projections' inputs r_q = 256 and r_kv = 128 (TE column linears) and the RoPE key d_rope
    = 32 (gather_from_sequence_parallel_region); column-parallel (multi_latent_attention.py L381-411 at
    NVIDIA/Megatron-LM@7094270c6f), each down-projection's h-wide input (TE), the Q latent r_q and the KV latent
    with the RoPE key r_kv + d_rope (gather_from_tensor_model_parallel_region), then the up-projections' r_q and r_kv.
    c['tp_att'] is those gathers' times less the pair's h-wide one; c['tp_mla_up'] the up-projections' two."""
    job, c = _parts(MLA, tp=4, dp=2, ep=2, etp=1, sequence_parallel=True, mla_column_down_proj=column)
    widths = [H, H, 256, 128 + 32, 256, 128] if column else [256, 128, 32]
    want = sum(_ag(S * w * 2.0, 4, job) for w in widths) - _ag(S * H * 2.0, 4, job)
    assert float(np.ravel(c["tp_att"])[0]) == pytest.approx(want, rel=1e-12)
    assert float(np.ravel(c["tp_mla_up"])[0]) == pytest.approx(_ag(S * 256 * 2.0, 4, job) + _ag(S * 128 * 2.0, 4, job),
                                                              rel=1e-12)


@pytest.mark.parametrize("column", [False, True])
def test_full_rank_query_gathers_by_hand(column: bool) -> None:
    """r_q = 0 (DeepSeek-V2-Lite's full-rank query): linear_q_proj (a TE column linear) gathers the h-wide hidden
    states in both builds; the KV side as above: duplicated r_kv + d_rope, column h, r_kv + d_rope and r_kv."""
    mla = MLASpec(kv_lora_rank=128, q_lora_rank=0, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)
    job, c = _parts(mla, tp=4, dp=2, ep=2, etp=1, sequence_parallel=True, mla_column_down_proj=column)
    widths = [H, H, 128 + 32, 128] if column else [H, 128, 32]
    want = sum(_ag(S * w * 2.0, 4, job) for w in widths) - _ag(S * H * 2.0, 4, job)
    assert float(np.ravel(c["tp_att"])[0]) == pytest.approx(want, rel=1e-12)
    assert float(np.ravel(c["tp_mla_up"])[0]) == pytest.approx(_ag(S * H * 2.0, 4, job) + _ag(S * 128 * 2.0, 4, job),
                                                              rel=1e-12)


@pytest.mark.parametrize("column, gathers", [(False, 3), (True, 6)])
def test_each_gather_priced_once(monkeypatch, column: bool, gathers: int) -> None:  # type: ignore[no-untyped-def]
    """The planner's hot path: _mp_collectives prices MLA's gathers once each, the up-projections' two shared by the
    block and mla_up_proj's recompute, and nothing of MLA's for a model without it: three collectives more than the
    same model without MLA (duplicated: r_q, r_kv, d_rope), six column-parallel (h, r_q, h, r_kv + d_rope too)."""
    calls: list[str] = []
    priced = model_parallel_comm._collective

    def counted(op, *args, **kw):  # type: ignore[no-untyped-def]
        calls.append(op)
        return priced(op, *args, **kw)

    monkeypatch.setattr(model_parallel_comm, "_collective", counted)
    kw = dict(tp=4, dp=2, ep=2, etp=1, sequence_parallel=True, mla_column_down_proj=column)
    _parts(None, **kw)
    plain = len(calls)
    calls.clear()
    _parts(MLA, **kw)
    assert len(calls) - plain == gathers and calls.count("allgather") >= gathers


def test_no_extra_gather_without_mla_or_sp() -> None:
    _, c = _parts(None, tp=4, dp=2, ep=2, etp=1, sequence_parallel=True, mla_column_down_proj=True)
    assert float(np.ravel(c["tp_att"])[0]) == 0.0
    _, c = _parts(MLA, moe=False, tp=4, dp=2, sequence_parallel=False, mla_column_down_proj=True)
    assert float(np.ravel(c["tp_att"])[0]) == 0.0


def test_step_tp_comm_grows_with_column_down_projections() -> None:
    """8 GPUs, tp 4 with SP, 4 MLA layers: the step's TP part grows with column-parallel down-projections by at
    least the forward's extra gathers (4 layers x 8 micro-batches x the difference of the two blocks' gathers, each
    its own collective), at
    most by that three times (the backward's, partly hidden under the weight-gradient GEMMs, and since sp31 the
    backward's re-gathers of the same inputs, partly hidden under the data-gradient GEMMs:
    docs/model.md#sp-regather)."""
    wl = TransformerWorkload(name="mla", layers=LAYERS, hidden=H, heads=8, ffn_hidden=4096, gated_mlp=True,
                             vocab=32_000, seq_len=S, tied_embeddings=False, mla=MLA,
                             moe=MoESpec(experts=8, top_k=2, ffn_hidden=512))
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", seq_len=S, moe_rank_imbalance=1.0)
    h100 = load_cluster("dgx-h100")
    kw = dict(tp=4, dp=2, ep=2, sequence_parallel=True)
    dup = predict(h100, wl, 8, tr, StrategySpec(**kw))
    col = predict(h100, wl, 8, tr, StrategySpec(**kw, mla_column_down_proj=True))
    job = build_job(h100, wl, tr)
    fwd = LAYERS * 8 * (sum(_ag(S * w * 2.0, 4, job) for w in (H, H, 256, 128 + 32, 256, 128))
                        - sum(_ag(S * w * 2.0, 4, job) for w in (256, 128, 32)))
    grew = col.breakdown_s["tp_comm"] - dup.breakdown_s["tp_comm"]
    assert fwd * (1 - 1e-9) <= grew <= 3 * fwd * (1 + 1e-9)
    assert col.strategy["mla_column_down_proj"] is True and dup.strategy["mla_column_down_proj"] is False


def test_flag_without_mla_is_a_warning(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    on = tmp_path / "on.yaml"
    on.write_text("mla_column_down_proj: true\n")
    r = cli("predict", "--model", "llama2-7b", "--gpus", "8", "--strategy", str(on))
    assert r.code == 0 and "mla_column_down_proj is not priced" in r.err, r.err
    on.write_text("mla_column_down_proj: true\netp: 1\n")
    r = cli("predict", "--model", "deepseek-v3", "--gpus", "1024", "--tp", "2", "--pp", "16", "--ep", "64",
            "--strategy", str(on))
    assert r.code == 0 and "mla_column_down_proj" not in r.err, r.err


def test_flag_without_its_gathers_is_a_warning(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """At tp 1 or without sequence parallelism the flag prices nothing (tp_att needs SP at tp > 1; without SP the
    count's all-reduce stays, docs/model.md#mla-tp): a warning, as for the other fields the model gives nothing to act
    on, one line, exit 0. A dense MLA model (an MoE one at tp > 1 needs SP under Megatron-Core)."""
    model = tmp_path / "mla.yaml"
    model.write_text("kind: transformer\nname: mla-dense\nlayers: 4\nhidden: 1024\nheads: 8\nffn_hidden: 4096\n"
                     "vocab: 32000\nseq_len: 2048\ngated_mlp: true\nmla:\n  kv_lora_rank: 128\n  q_lora_rank: 256\n"
                     "  qk_nope_head_dim: 64\n  qk_rope_head_dim: 32\n  v_head_dim: 64\n")
    on = tmp_path / "on.yaml"
    for text, why in (("mla_column_down_proj: true\ntp: 1\n", "tp is 1"),
                      ("mla_column_down_proj: true\ntp: 2\nsequence_parallel: false\n", "sequence_parallel")):
        on.write_text(text)
        r = cli("predict", "--model", str(model), "--gpus", "8", "--strategy", str(on))
        lines = [ln for ln in r.err.splitlines() if "mla_column_down_proj" in ln]
        assert r.code == 0 and len(lines) == 1 and "is not priced" in lines[0] and why in lines[0], r.err
    on.write_text("mla_column_down_proj: true\ntp: 2\nsequence_parallel: true\n")
    r = cli("predict", "--model", str(model), "--gpus", "8", "--strategy", str(on))
    assert r.code == 0 and "mla_column_down_proj" not in r.err, r.err


def test_bad_value_is_a_one_line_error(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.yaml"
    bad.write_text("mla_column_down_proj: sometimes\n")
    r = cli("predict", "--model", "deepseek-v3", "--gpus", "64", "--strategy", str(bad))
    assert r.code == 2 and r.err.startswith("error: ") and "mla_column_down_proj" in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1


def test_column_window_is_cited_to_the_switch_that_lasted() -> None:
    """NVIDIA/Megatron-LM e63aee46b2 (2025-06-13, "perf(MLA): MLA down proj switch back to TELinear") was reverted the
    same day (f21a28b478), and f7e46419ac (2025-06-16) built the down-projections with backend.column_parallel_linear()
    again; the switch landed for good as 720c8b40d8 (2025-07-29, first in core_v0.14.0), so core_v0.13.x builds them
    column-parallel too. The field's description (the schema) and docs/model.md#mla-tp name that window."""
    root = Path(__file__).resolve().parent.parent
    schema = json.loads((root / "schemas" / "scenario.schema.json").read_text())
    texts = [d["description"] for d in _find(schema, "mla_column_down_proj")]
    doc = (root / "docs" / "model.md").read_text()
    texts.append(doc[doc.index('<a id="mla-tp">'):doc.index('<a id="tp-comm-moe">')])
    assert texts[0] and len(texts) >= 2
    for text in texts:
        assert "720c8b40d8" in text and "core_v0.13" in text, text[:200]


def _find(node, key):  # type: ignore[no-untyped-def]
    """Every value under ``key`` anywhere in a JSON document."""
    if isinstance(node, dict):
        yield from ([node[key]] if key in node else [])
        for v in node.values():
            yield from _find(v, key)
    elif isinstance(node, list):
        for v in node:
            yield from _find(v, key)
