"""tp34: each TP collective under its own linear's GEMM, and the parallel block's collectives (docs/model.md#tp34).

(a) Transformer Engine overlaps a linear's collective with that linear's own GEMMs, inside the linear's forward or
backward (NVIDIA/TransformerEngine@c55e425ac5, v2.2, pytorch/module/linear.py L230-262 the forward's userbuffers
overlap inside its own ``general_gemm``; L582-588 / L676-679 the input-gradient collective launched after the
data-gradient GEMM and waited on after the weight-gradient GEMM; layernorm_linear.py L662-668 / L753-756,
layernorm_mlp.py L880-886 / L957-960). Until tp34 each side's linears were one pool (QKV with FC1, O-proj with FC2):
FC1's spare GEMM time hid QKV's excess. Now

    exposed = sum_k n_k max(c_k - e w_k, f c_k)   against the pool's   max(sum c - e sum w, f sum c)

By hand on tests/test_tp33.py's small GPT layer (h 1024, MLP 4h not gated, s 2048, 4 layers at tp 4 on one DGX H100):
a layer's weight-GEMM time G splits QKV 3/12, O-proj 1/12, FC1 4/12, FC2 4/12.

(b) GPT-NeoX's parallel block (``gpt_j_residual``, EleutherAI/gpt-neox@ea7aefd8f8 megatron/model/transformer.py
L951-959 / L1063-1118, mpu/layers.py L556-576 / L764-782, mpu/mappings.py L283-296 / L400-417): the attention and
MLP row-parallel linears skip their reduction (``parallel_output``) and the layer reduces their sum once (all-reduce,
or reduce-scatter with SP); QKV and FC1 are each a ColumnParallelLinear with its own ``copy_to_model_parallel_region``
(no SP) or ``gather_from_sequence_parallel_region`` (SP), whether or not the norms are tied (``gpt_j_tied`` only
shares the norm's output tensor). Per layer: forward 1 reduction + [SP] 2 all-gathers, backward [SP] 1 all-gather
(the reduce-scatter's mirror) + 2 reductions (each column linear's input gradient), all blocking autograd
collectives on the compute stream; F.linear saves the gathered input, so no re-gather.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.engine import layer_compute
from scalemodel.engine import model_parallel_comm as mpc
from scalemodel.specs import TransformerWorkload
from tests.test_tp33 import LAYERS, TP, A, E, H, N, S, _setup, _t, _tp

QKV, O, FC1, FC2 = 3 / 12, 1 / 12, 4 / 12, 4 / 12


def _excess(c: float, gemm: float, shares: tuple[float, ...], edge: float = 1.0, floor: float = 0.0) -> float:
    """Per layer: each linear's collective c past edge x its own GEMM (a share of the layer's G)."""
    return sum(max(c - edge * s * gemm, floor * c) for s in shares)


@pytest.mark.parametrize(("precision", "recipe", "q"), [("bf16", None, 2.0), ("fp8", "delayed", 1.0)])
def test_sp_one_linear_past_its_gemm_the_other_not(precision: str, recipe: str | None, q: float) -> None:
    """SP, no userbuffers: G = 3.4 RS, so QKV's weight-gradient GEMM (0.85 RS) is shorter than its reduce-scatter and
    FC1's (1.13 RS) longer. Per layer QKV shows 0.15 RS; the pool showed max(2 RS - 7/12 x 3.4 RS, 0) = RS / 60."""
    job, g, c = _setup(precision, recipe)
    rs, ag = _t("reducescatter", 2 * E, job), _t("allgather", q * E, job)
    gemm = 3.4 * rs
    got = _tp(job, g, c, gemm)
    own_rs, own_ag = LAYERS * _excess(rs, gemm, (QKV, FC1)), LAYERS * _excess(ag, gemm, (QKV, FC1))
    assert own_rs == pytest.approx(LAYERS * 0.15 * rs, rel=1e-12)
    # forward RS + AG exposed, the blocking output-gradient gathers (per-tensor FP8 gathers 1 byte: q_g = q)
    assert got["tp"] == pytest.approx(N * (rs + ag) + N * ag + own_rs + own_ag, rel=1e-12)
    assert got["hidden_bwd"] == pytest.approx(N * (rs + ag) - own_rs - own_ag, rel=1e-12)
    pooled = max(N * rs - LAYERS * A * gemm, 0.0) + max(N * ag - LAYERS * A * gemm, 0.0)
    assert pooled == pytest.approx(LAYERS * rs / 60 + max(N * ag - LAYERS * A * gemm, 0.0), rel=1e-9)
    # the per-linear rule exposes the amount the pool hid under FC1's spare time
    assert got["tp"] - (N * (rs + ag) + N * ag + pooled) == pytest.approx(own_rs + own_ag - pooled, rel=1e-12)
    assert own_rs + own_ag - pooled > 0.1 * LAYERS * rs


def test_no_sp_allreduce_per_linear() -> None:
    """No SP: each column linear's async all-reduce under its own weight-gradient GEMM; G = 3.4 AR."""
    job, g, c = _setup(sequence_parallel=False)
    ar = _t("allreduce", 2 * E, job)
    gemm = 3.4 * ar
    got = _tp(job, g, c, gemm)
    own = LAYERS * _excess(ar, gemm, (QKV, FC1))
    assert own == pytest.approx(LAYERS * 0.15 * ar, rel=1e-12)
    assert got["tp"] == pytest.approx(N * ar + own, rel=1e-12)
    assert got["hidden_bwd"] == pytest.approx(N * ar - own, rel=1e-12)


def test_userbuffers_per_linear_by_hand() -> None:
    """Userbuffers, bf16: each ring / pipeline / bulk overlap beside its own linear's GEMM, at review33b's edges
    (ring 1 - 1/tp, pipeline 3/4 with its last quarter exposed at least, bulk 1). G = 3.4 RS: O-proj's pipeline
    (3/4 x 1/12 G = 0.21 RS) is far past, FC2's (0.85 RS) only by its floor's margin."""
    job, g, c = _setup("bf16", None, tp_comm_overlap=True)
    rs, ag = _t("reducescatter", 2 * E, job), _t("allgather", 2 * E, job)
    gemm = 3.4 * rs
    ring = 1 - 1 / TP
    fwd = _excess(ag, gemm, (QKV, FC1), ring) + _excess(rs, gemm, (O, FC2), 0.75, 0.25)
    bwd = _excess(ag, gemm, (O, FC2), ring) + _excess(rs, gemm, (QKV, FC1)) + _excess(ag, gemm, (QKV, FC1))
    got = _tp(job, g, c, gemm)
    assert got["tp"] == pytest.approx(LAYERS * (fwd + bwd), rel=1e-12)
    assert got["hidden_fwd"] == pytest.approx(N * (ag + rs) - LAYERS * fwd, rel=1e-12)
    assert got["hidden_bwd"] == pytest.approx(N * (ag + rs + ag) - LAYERS * bwd, rel=1e-12)
    pooled_fwd = max(2 * ag - ring * (QKV + FC1) * gemm, 0.0) + max(2 * rs - 0.75 * (O + FC2) * gemm, 0.5 * rs)
    assert fwd > pooled_fwd  # O-proj's excess no longer hides under FC2's spare time


def test_windows_broadcast_over_candidates() -> None:
    """The per-linear sum on an array of GEMM times equals the scalar ones, candidate by candidate."""
    job, g, c = _setup()
    comp = layer_compute._compute_per_microbatch(job, g, np.ones(1) * LAYERS, logits_on_stage=False)
    gemms = np.asarray([1e-5, 2e-4, 3e-3])
    many = mpc._own_windows(job, g, dict(comp, gemm_per_layer=gemms), 1e-4, 0)
    for i, one in enumerate(gemms):
        single = mpc._own_windows(job, g, dict(comp, gemm_per_layer=np.asarray([one])), 1e-4, 0)
        for a, b in zip(many, single, strict=True):
            assert float(np.broadcast_to(a, gemms.shape)[i]) == pytest.approx(float(np.ravel(b)[0]), rel=1e-12)


def _parallel(sp: bool) -> tuple:  # type: ignore[type-arg]
    wl = TransformerWorkload(name="gpt-small-parallel", layers=LAYERS, hidden=H, heads=8, ffn_hidden=4 * H,
                             gated_mlp=False, vocab=32_000, seq_len=S, tied_embeddings=False, parallel_block=True,
                             norms_per_layer=1)
    return _setup("bf16", None, wl=wl, sequence_parallel=sp)


def test_parallel_block_counts_with_sp() -> None:
    """GPT-NeoX with SP, per layer: forward 1 RS + 2 AG, backward 1 AG + 2 RS, all exposed, no re-gather (the GEMM
    time is long: the sequential layer would hide its backward reduce-scatters and re-gathers)."""
    job, g, c = _parallel(True)
    rs, ag = _t("reducescatter", 2 * E, job), _t("allgather", 2 * E, job)
    got = _tp(job, g, c, 1.0)
    assert got["tp"] == pytest.approx(LAYERS * ((rs + 2 * ag) + (ag + 2 * rs)), rel=1e-12)
    assert got["hidden_bwd"] == 0.0 and got["hidden_fwd"] == 0.0


def test_parallel_block_counts_without_sp() -> None:
    """GPT-NeoX without SP, per layer: forward 1 all-reduce of the summed outputs, backward 2 (QKV's and FC1's
    input gradients, blocking ``_reduce``), against a sequential layer's 2 and 2 (its backward hidden here)."""
    job, g, c = _parallel(False)
    ar = _t("allreduce", 2 * E, job)
    got = _tp(job, g, c, 1.0)
    assert got["tp"] == pytest.approx(LAYERS * (ar + 2 * ar), rel=1e-12)
    assert got["hidden_bwd"] == 0.0
    seq_job, seq_g, seq_c = _setup(sequence_parallel=False)
    assert _tp(seq_job, seq_g, seq_c, 1.0)["tp"] == pytest.approx(LAYERS * 2 * ar, rel=1e-12)
