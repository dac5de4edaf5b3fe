"""xlaver36: the XLA release a run used (training.jax_release) and the later SPMD partitioner's head-side gathers
(docs/model.md#xlaver36; engine.model_parallel_comm._xla_head_side_gathers, cost.transformer.xla_head_side_gathers).

Measured in xlabwd36 and here (scripts/measure_xla_backward_gathers.py, GSPMD on CPU): up to jaxlib 0.4.28 each
weight-gradient dot of a tensor-parallel attention projection gathers its h-wide operand (the count the model priced
before); from 0.4.29 its narrower head-side one (dQ, dK, dV, the attention output), 4 x 0.8 s b h a layer at the v5p
32B row's widths, 1.125 s b h at the v6e 405B row's ratios (o h wide, dK / dV h / 16 each), none at a d = 1.5 h.
The byte counts below are worked by hand and against xlabwd36's numbers (tests/test_xlabwd36.py), the seconds by hand
on an ICI tier whose collective model is the one tests/test_xla_remat.py states.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import script_module
from grid_helpers import evaluated, one

from scalemodel.cost.transformer import shape, xla_head_side_gathers
from scalemodel.specs import TrainingSpec, TransformerWorkload, load_cluster
from scalemodel.specs.training import xla_later_partitioner

vt = script_module("validate_training")

#: the v5p 32B row's layer (MaxText 32b.sh at 76bd53b0f): h 10240, 32 heads of 256 (a d = 0.8 h), MHA, relu MLP
H32 = dict(hidden=10240, heads=32, head_dim=256, ffn_hidden=32768, vocab=32768)


def test_widths_by_hand() -> None:
    """Q, K, V, O slots: a d, g d, g v_d, a v_d where narrower than h (O also at a d = h, as measured)."""
    got = [float(np.asarray(w)) for w in xla_head_side_gathers(shape(layers=1, **H32))]
    assert got == [8192.0, 8192.0, 8192.0, 8192.0]  # 32 x 256 = 0.8 x 10240 each
    # Llama 3.1 405B (the v6e row): h 16384, 128 heads of 128 (a d = h: Q gathers the norm output), 8 KV heads
    g405 = [float(np.asarray(w)) for w in xla_head_side_gathers(
        shape(layers=1, hidden=16384, heads=128, kv_heads=8, ffn_hidden=53248, vocab=128256))]
    assert g405 == [0.0, 1024.0, 1024.0, 16384.0]
    assert sum(g405) / 16384 == pytest.approx(1.125)  # xlabwd36's "1 + 2/16 s b h a layer's backward"
    # heads wider than h (the v5p 128B / 1024B and v5e 128B rows: a d = 1.6 h): nothing added, as measured at 1.5 h
    wide = xla_head_side_gathers(shape(layers=1, hidden=12288, heads=96, head_dim=208, ffn_hidden=49152, vocab=32768))
    assert all(float(np.asarray(w)) == 0.0 for w in wide)


def test_bytes_per_gather_by_hand_match_xlabwd36() -> None:
    """The dQ gather at the 32B layer, 8 sequences of 2048 a device, bf16: 8 x 2048 x 8192 x 2 = 268,435,456 bytes
    gathered, the figure tests/test_xlabwd36.py reads off the HLO's bf16[8,2048,32,256] all-gather; the h-wide one
    335,544,320 (bf16[8,2048,10240])."""
    q = float(np.asarray(xla_head_side_gathers(shape(layers=1, **H32))[0]))
    tokens, elem = 8 * 2048, 2
    assert tokens * q * elem == 268_435_456
    assert tokens * 10240 * elem == 335_544_320
    m = script_module("measure_xla_backward_gathers")
    dq = m.Gather("copy.44", (8, 2048, 32, 256), 2, (0, 1, 2, 3), "bse,ehd->bshd")
    assert m.gather_bytes(dq)[0] == tokens * q * elem


def _ag(size: float, bw: float) -> float:
    """One all-gather of ``size`` gathered bytes over 4 chips of an ICI tier of ``bw`` B/s (tests/test_xla_remat.py:
    the direct algorithm, (p-1)/p S at 0.80 of the link, one 0.75 us hop)."""
    return 0.75 * size / (0.80 * bw) + 0.75e-6


def _tp_comm(release: str, block: str, recompute: dict, bw: str = "") -> float:
    wl = TransformerWorkload(name="t32", layers=4, seq_len=2048, parallel_block=block == "parallel", gated_mlp=False,
                             biases=False, **H32)
    tr = TrainingSpec(global_batch=64, micro_batch=8, precision="bf16", seq_len=2048, jax_release=release or None)
    cl = load_cluster("tpu-v5p-pod", [f"tiers.ici.bandwidth={bw}"] if bw else [])
    _, _, r = evaluated(cl, wl, tr, 64, dp=16, tp=4, sequence_parallel=True, layer_impl="xla", flash_attention=True,
                        **recompute)
    return one(r.breakdown["tp_comm"])


MINIMAL = dict(recompute="selective", recompute_modules="jax_dots")  # MaxText remat_policy minimal
FULL = dict(recompute="full")


@pytest.mark.parametrize(("block", "policy", "spared"), [
    ("sequential", MINIMAL, 1),  # measured 4 -> 7 tensors: + dQ dK dV o, - the first norm output
    ("sequential", FULL, 0),  # 4 -> 8: the recomputed forward gathers that norm output anyway
    ("parallel", MINIMAL, 0),  # 2 -> 6: the shared norm output still feeds wi's weight gradient
])
def test_exposed_seconds_by_hand_when_the_window_is_spent(block: str, policy: dict, spared: int) -> None:
    """A 1 GB/s ICI: the backward's TP traffic already outlasts the weight-gradient compute, so every added gather
    is exposed (none hides beyond the compute under it) and a spared one comes off the exposed re-gathers:
    4 layers x (4 AG(268,435,456) - spared AG(335,544,320))."""
    bw = 1e9
    want = 4 * (4 * _ag(268_435_456, bw) - spared * _ag(335_544_320, bw))
    got = _tp_comm("0.4.30", block, policy, "1e9") - _tp_comm("0.4.23", block, policy, "1e9")
    assert got == pytest.approx(want, rel=1e-6)


def test_added_gathers_hide_under_the_weight_gradient_compute() -> None:
    """v5p's 600 GB/s ICI: the added gathers fit beside the weight-gradient compute (XLA schedules them there), so
    the later partitioner's sequential `minimal` layer is cheaper by exactly the spared norm re-gather,
    4 x AG(335,544,320); the parallel block (nothing spared) is unchanged."""
    d = _tp_comm("0.4.23", "sequential", MINIMAL) - _tp_comm("0.4.30", "sequential", MINIMAL)
    assert d == pytest.approx(4 * _ag(335_544_320, 600e9), rel=1e-6)
    assert _tp_comm("0.4.30", "parallel", MINIMAL) == pytest.approx(_tp_comm("0.4.23", "parallel", MINIMAL))
    # unset is the later partitioner (the current releases')
    assert _tp_comm("", "parallel", MINIMAL, "1e9") == pytest.approx(_tp_comm("0.4.30", "parallel", MINIMAL, "1e9"))


def test_generation_boundaries() -> None:
    """Measured: 0.4.20, 0.4.23, 0.4.26, 0.4.28 the earlier partitioner, 0.4.29, 0.4.30, 0.4.37 the later; releases
    compare as numbers, not text (0.4.100 after 0.4.29)."""
    for release, later in (("0.3.4", False), ("0.4.6", False), ("0.4.9", False), ("0.4.23", False),
                           ("0.4.28", False), ("0.4.29", True), ("0.4.30", True), ("0.4.100", True), ("0.5.0", True),
                           ("0.7.0", True), ("1.0.0", True)):
        assert xla_later_partitioner(TrainingSpec(jax_release=release)) is later, release
    assert xla_later_partitioner(TrainingSpec()) is True


def test_bad_release_exits_2_naming_the_field(cli) -> None:  # type: ignore[no-untyped-def]
    base = ("predict", "-m", "gpt-1.7b", "-c", "tpu-v5p-pod", "-n", "8")
    for text in ("0.4", "v0.4.30", "0.4.30.dev1", "0.04.30", " 0.4.30"):
        r = cli(*base, "--set", f"training.jax_release='{text}'")
        assert r.code == 2 and r.out == "" and r.err.count("\n") == 1, r.err
        assert r.err.startswith("error: --set training.jax_release"), r.err
    r = cli(*base, "--set", "training.jax_release=0.4")  # a bare YAML number: its text '0.4', refused by form
    assert r.code == 2 and r.err.startswith("error: --set training.jax_release"), r.err
    assert cli(*base, "--set", "training.jax_release='0.4.30'").code == 0


def test_rows_state_their_release() -> None:
    """Every row of an XLA source whose source states or implies its JAX carries it (mtgpu24 states none: left on
    the default, tensor 1 there prices nothing); the 2023 v5p rows ran the earlier partitioner, the 2025 v6e 405B
    row the later one, and a release the partitioner refuses is on no row."""
    rows = vt.rows_with("jax_release")
    cases = vt.read_yaml(vt.NEW_CASES)
    for c in cases:
        src = c["id"].split("_")[0]
        if src in ("maxtext", "maxtext23", "mtv5e23", "mttier25", "mtdgxc24") or c["id"].startswith("palm_"):
            assert c["id"] in rows, c["id"]
        if src == "mtgpu24":
            assert c["id"] not in rows
    for rel in rows.values():
        xla_later_partitioner(TrainingSpec(jax_release=rel))  # none refused
    assert rows["maxtext_v5p_32b_1x128"] == "0.4.23" and rows["mttier25_v6e_llama31_405b_256"] == "0.7.0"
    assert not xla_later_partitioner(TrainingSpec(jax_release=rows["maxtext_v5p_256b_1x1024"]))
    assert xla_later_partitioner(TrainingSpec(jax_release=rows["mttier25_v6e_llama31_405b_256"]))


def test_v6e_405b_row_prices_the_head_side_gathers_hidden() -> None:
    """The v6e 405B row (tensor 4 on ICI, jax_qkvo, its stated 0.7.0): the added dK, dV and o gathers (1.125 s b h a
    layer) sit beside its weight-gradient compute, so its prediction is the earlier partitioner's to the digit."""
    c = next(x for x in vt.read_yaml(vt.NEW_CASES) if x["id"] == "mttier25_v6e_llama31_405b_256")
    later = vt.predict_new_case(c).predicted
    early = dict(c, framework=dict(c["framework"], jax_release="0.4.23"))
    assert later == pytest.approx(vt.predict_new_case(early).predicted, rel=1e-9)
