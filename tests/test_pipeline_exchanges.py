"""How many stage-boundary exchanges a pipeline rank pays per micro-batch in the non-interleaved schedules
(docs/model.md#pp-comm, ``model_parallel_comm.pp_exchanges``): a middle rank exchanges with both neighbours, a
pipeline of 2 ranks has one boundary, so each rank exchanges once. nanotron's OneForwardOneBackwardPipelineEngine is
transcribed here step by step (huggingface/nanotron@c2528430 src/nanotron/parallel/pipeline_parallel/engine.py lines
222-330, state.py ``run_communication`` lines 124-172, block.py lines 60-163, functional.py), every transfer a
rendezvous of its two ranks (a blocking send / recv: ``P2P.send_tensors`` / ``recv_tensors`` wait each future),
and the priced pp_comm is checked against it and by hand."""

from __future__ import annotations

import numpy as np
import pytest
from grid_helpers import evaluated, first
from test_deepspeed_pipeline import ds_commands
from test_deepspeed_pipeline import simulate as ds_simulate

from scalemodel.cost import collectives as coll
from scalemodel.cost.placement import parallel_groups
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.model_parallel_comm import _mp_collectives
from scalemodel.engine.step import _end_rank, _stage, evaluate
from scalemodel.specs import TrainingSpec, load_cluster, load_workload
from scalemodel.specs.training import StrategySpec

Op = tuple[str, int, int]  # (kind, peer rank, micro-batch); compute ops have peer -1


def nanotron_program(r: int, p: int, m: int) -> list[Op]:
    """Rank r's operations in nanotron's 1F1B engine. The hidden states (H), with their gradient (G) back, and the
    sequence mask (M, no gradient) cross each boundary (models/llama.py: a decoder block's inputs are hidden_states
    and sequence_mask). A forward on a rank > 0 opens with ``recv_from_pipeline_state_buffer`` for each input in
    sorted order: ``run_communication`` receives H, then (H requires grad) sends the gradient the last backward left
    pending, then receives M. A forward's outputs are registered to send lazily: in the warm-up the engine sends them
    at once (engine.py lines 254-269); in the steady phase the next backward's ``SendTensorToPipelineBuffer.backward``
    runs ``run_communication``: send H, receive G, and the mask's send after it. A backward's input gradient is
    registered to send lazily (``RecvTensorFromPipelineBuffer.backward``), sent by the next forward's receive or, in
    the cool-down, at once (lines 307-325). Warm-up: p - r - 1 forwards (line 249)."""
    w = p - r - 1
    first_r, last_r = r == 0, r == p - 1
    out: list[Op] = []
    pending: int | None = None

    def forward(i: int, eager: bool) -> None:
        nonlocal pending
        if not first_r:
            out.append(("recv_H", r - 1, i))
            if pending is not None:
                out.append(("send_G", r - 1, pending))
                pending = None
            out.append(("recv_M", r - 1, i))
        out.append(("F", -1, i))
        if eager and not last_r:
            out.extend([("send_H", r + 1, i), ("send_M", r + 1, i)])

    def backward(j: int, sent: int | None) -> None:
        nonlocal pending
        if not last_r:
            if sent is not None:
                out.append(("send_H", r + 1, sent))
            out.append(("recv_G", r + 1, j))
            if sent is not None:
                out.append(("send_M", r + 1, sent))
        out.append(("B", -1, j))
        if not first_r:
            pending = j

    for i in range(w):
        forward(i, eager=True)
    for i in range(w, m):
        forward(i, eager=False)
        backward(i - w, sent=i)
    if pending is not None:
        out.append(("send_G", r - 1, pending))
        pending = None
    for j in range(m - w, m):
        backward(j, sent=None)
        if pending is not None:
            out.append(("send_G", r - 1, pending))
            pending = None
    return out


PARTNER = {"recv_H": "send_H", "send_H": "recv_H", "recv_G": "send_G", "send_G": "recv_G", "recv_M": "send_M",
           "send_M": "recv_M"}


def nanotron_simulate(p: int, m: int, f: float | list[float], b: float | list[float], c: float,
                      c_mask: float = 0.0) -> float:
    """Wall time of one batch: compute in each rank's order (``f`` / ``b`` one value for every rank or one per rank);
    each transfer starts when both ranks reach it and takes ``c`` seconds (H, G) or ``c_mask`` (M)."""
    fs = f if isinstance(f, list) else [f] * p
    bs = b if isinstance(b, list) else [b] * p
    prog = [nanotron_program(r, p, m) for r in range(p)]
    pc, t = [0] * p, [0.0] * p
    while any(pc[r] < len(prog[r]) for r in range(p)):
        moved = False
        for r in range(p):
            while pc[r] < len(prog[r]):
                op, peer, k = prog[r][pc[r]]
                if op in ("F", "B"):
                    t[r] += fs[r] if op == "F" else bs[r]
                elif pc[peer] < len(prog[peer]) and prog[peer][pc[peer]] == (PARTNER[op], r, k):
                    t[r] = t[peer] = max(t[r], t[peer]) + (c_mask if op.endswith("M") else c)
                    pc[peer] += 1
                else:
                    break
                pc[r] += 1
                moved = True
        assert moved, "deadlock"
    return max(t)


def test_nanotron_engine_is_1f1b_without_traffic() -> None:
    for p, m in ((2, 4), (4, 8), (5, 5), (8, 20)):
        assert nanotron_simulate(p, m, 1.0, 2.0, 0.0) == pytest.approx((m + p - 1) * 3.0)


@pytest.mark.parametrize(("p", "exchanges"), [(2, 1), (3, 2), (4, 2), (8, 2)])
def test_nanotron_steady_state_pays_two_sequential_transfers_per_boundary(p: int, exchanges: int) -> None:
    """Each added micro-batch costs f + b + 2 c per boundary the rank exchanges on (H then G, one after the other, not
    Megatron's batched send_forward_recv_backward), plus the mask's transfer: 1 boundary at p = 2, 2 on a middle
    rank. The batch stays under (m + p - 1) x that micro-batch, what pp_comm and the bubble price."""
    f, b, c, cm = 1.0, 2.0, 0.1, 0.01
    slope = nanotron_simulate(p, 41, f, b, c, cm) - nanotron_simulate(p, 40, f, b, c, cm)
    assert slope == pytest.approx(f + b + exchanges * (2 * c + cm), rel=1e-12)
    assert nanotron_simulate(p, 40, f, b, c, cm) <= (40 + p - 1) * (f + b + exchanges * (2 * c + cm)) + 1e-9


@pytest.mark.parametrize(("p", "exchanges"), [(2, 1), (3, 2), (6, 2)])
def test_deepspeed_train_schedule_exchanges(p: int, exchanges: int) -> None:
    """DeepSpeed's TrainSchedule (tests/test_deepspeed_pipeline.py's simulation): at p = 2 a stage has one
    neighbour, so 2 c a micro-batch, not the middle rank's 4 c."""
    slope = ds_simulate(p, 41, 1.0, 2.0, 0.1) - ds_simulate(p, 40, 1.0, 2.0, 0.1)
    assert slope == pytest.approx(3.0 + exchanges * 2 * 0.1, rel=1e-12)


def test_priced_exchanges_by_hand(a100) -> None:  # type: ignore[no-untyped-def]
    """gpt-7.5b, tp 1 x dp 2 x pp 4 and tp 1 x dp 4 x pp 2 in one DGX A100 node, micro-batch 1, 16 micro-batches: a
    middle rank's pipeline traffic (pp 4) is nanotron's 2 x (2 T(act) + metadata and mask) a micro-batch, DeepSpeed's
    4 T(shard) (tp 1: no TP gathers), Megatron 1F1B's 2 T(act); an end rank's (and every rank's at pp 2) half that.
    The step's pp_comm is the busiest rank's, here the last (the logits on equal layers), an end rank at either pp:
    one boundary's. Megatron's interleaved schedule 2 v T(act) on every rank (without overlap_p2p_comm)."""
    wl = load_workload("gpt-7.5b")
    s, h = float(wl.seq_len), float(wl.hidden)
    act = s * h * 2.0
    for pp, dp, n_mid in ((4, 2, 2.0), (2, 4, 1.0)):
        tr = TrainingSpec(global_batch=16 * dp, micro_batch=1, precision="bf16", grad_bytes_per_param=4.0)
        job, g_nano, nano = evaluated(a100, wl, tr, 8, tp=1, pp=pp, zero="1", nanotron_trainer=True)
        _, g_ds, ds = evaluated(a100, wl, tr, 8, tp=1, pp=pp, deepspeed_pipeline=True)
        _, g_mega, mega = evaluated(a100, wl, tr, 8, tp=1, pp=pp, zero="1")
        _, _, inter = evaluated(a100, wl, tr, 8, tp=1, pp=pp, zero="1", schedule="interleaved:2")

        def t(nbytes: float, net=job.network, stride=dp) -> float:  # type: ignore[no-untyped-def]
            return first(coll.collective_time("sendrecv", nbytes, 2, net, stride=stride))  # neighbours dp apart

        def middle(g, job=job) -> float:  # type: ignore[no-untyped-def]
            groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp)
            return first(_stage(job, g, groups, np.asarray([8.0]), False).mp["pp"])

        # + the hosts' synchronisations: 3 tensors x (4 sender's + 2 receiver's) at 8.3 us (docs/model.md#nanotron)
        meta = 3 * t(56.0) + 2 * t(48.0) + t(32.0) + t(s) + 3 * (4 + 2) * 8.3e-6
        one = {"nano": 2 * t(act) + meta, "ds": 2 * t(act), "mega": t(act)}  # one boundary, one micro-batch
        for name, g, res in (("nano", g_nano, nano), ("ds", g_ds, ds), ("mega", g_mega, mega)):
            assert middle(g) == pytest.approx(n_mid * one[name], rel=1e-12), name
            assert first(res.breakdown["pp_comm"]) == pytest.approx(16 * one[name], rel=1e-12), name
        assert first(inter.breakdown["pp_comm"]) == pytest.approx(16 * 2 * 2 * t(act), rel=1e-12)


Transfer = tuple[str, int, int, int]  # (A or G, micro-batch, from rank, to rank)


def megatron_program(r: int, p: int, m: int) -> list[tuple[str, int, list[Transfer]]]:
    """Rank r's operations in Megatron-Core's 1F1B (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/pipeline_parallel/
    schedules.py ``forward_backward_pipelining_without_interleaving``, lines 2277-2474): min(p - r - 1, m) warm-up
    forwards, each after a blocking ``recv_forward`` and before a blocking ``send_forward``; one ``recv_forward``
    before the steady phase; each steady iteration a forward, ``send_forward_recv_backward`` (one batch: the
    activation to the next rank and its gradient from it), a backward and ``send_backward_recv_forward`` (one batch:
    the gradient to the previous rank and the next activation from it; ``send_backward`` on the last iteration);
    cool-down ``recv_backward``, backward, ``send_backward``. Every call is one ``_communicate``: with
    ``batch_p2p_comm`` (True, model_parallel_config.py line 390; Megatron-LM sets it unless overlap_p2p_comm, which
    1F1B refuses) one ``batch_isend_irecv`` of the call's sends and receives, all waited (p2p_communication.py lines
    22-57, 370-420); the first stage's and the last stage's calls toward no neighbour send nothing (lines 536-600).
    Each entry: ("F" / "B", micro-batch, []) or ("X", -1, the batch's transfers)."""
    w = min(p - r - 1, m)
    prev_ok, next_ok = r > 0, r < p - 1
    out: list[tuple[str, int, list[Transfer]]] = []

    def comm(*xs: Transfer | None) -> None:
        batch = [x for x in xs if x is not None]
        if batch:
            out.append(("X", -1, batch))

    def act_in(k: int) -> Transfer | None:
        return ("A", k, r - 1, r) if prev_ok else None

    def act_out(k: int) -> Transfer | None:
        return ("A", k, r, r + 1) if next_ok else None

    def grad_in(k: int) -> Transfer | None:
        return ("G", k, r + 1, r) if next_ok else None

    def grad_out(k: int) -> Transfer | None:
        return ("G", k, r, r - 1) if prev_ok else None

    for i in range(w):
        comm(act_in(i))
        out.append(("F", i, []))
        comm(act_out(i))
    if m - w > 0:
        comm(act_in(w))
    for i in range(m - w):
        out.append(("F", w + i, []))
        comm(act_out(w + i), grad_in(i))
        out.append(("B", i, []))
        comm(grad_out(i), act_in(w + i + 1) if i < m - w - 1 else None)
    for j in range(m - w, m):
        comm(grad_in(j))
        out.append(("B", j, []))
        comm(grad_out(j))
    return out


def megatron_simulate(p: int, m: int, f: float | list[float], b: float | list[float], c: float,
                      drain: float = 0.0) -> float:
    """Wall time of one batch: compute in each rank's order (``f`` / ``b`` one value for every rank or one per rank);
    a batch posts its transfers when its rank reaches it and holds the rank until all of them end; a transfer runs
    from the later of its two posts for ``c`` seconds (the two directions of a boundary at once, NVLink and
    InfiniBand being full duplex). ``drain``: seconds the last rank runs after its program (its last send_backward),
    ``finish_embedding_wgrad_compute`` (schedules.py L2486), which nothing waits on (tests/test_rdv41.py)."""
    return max(megatron_rank_ends(p, m, f, b, c, drain))


def megatron_rank_ends(p: int, m: int, f: float | list[float], b: float | list[float], c: float,
                       drain: float = 0.0) -> list[float]:
    """:func:`megatron_simulate`'s end of each rank's program (the last rank's with ``drain`` after it)."""
    fs = f if isinstance(f, list) else [f] * p
    bs = b if isinstance(b, list) else [b] * p
    prog = [megatron_program(r, p, m) for r in range(p)]
    pc, t = [0] * p, [0.0] * p
    posts: dict[tuple[Transfer, int], float] = {}  # (transfer, posting rank) -> time
    while any(pc[r] < len(prog[r]) for r in range(p)):
        moved = False
        for r in range(p):
            while pc[r] < len(prog[r]):
                kind, _, batch = prog[r][pc[r]]
                if kind in ("F", "B"):
                    t[r] += fs[r] if kind == "F" else bs[r]
                else:
                    for x in batch:
                        posts.setdefault((x, r), t[r])
                    peers = [(x, x[3] if x[2] == r else x[2]) for x in batch]
                    if not all((x, q) in posts for x, q in peers):
                        break
                    t[r] = max(max(posts[(x, r)], posts[(x, q)]) + c for x, q in peers)
                pc[r] += 1
                moved = True
        assert moved, "deadlock"
    t[p - 1] += drain
    return t


def test_megatron_1f1b_without_traffic() -> None:
    for p, m in ((2, 4), (4, 8), (5, 5), (8, 20)):
        assert megatron_simulate(p, m, 1.0, 2.0, 0.0) == pytest.approx((m + p - 1) * 3.0)


@pytest.mark.parametrize(("p", "exchanges"), [(2, 1), (3, 2), (4, 2), (8, 2)])
def test_megatron_1f1b_steady_state_pays_one_batched_exchange_per_boundary(p: int, exchanges: int) -> None:
    """Each added micro-batch costs f + b + c per boundary the rank exchanges on: the activation out and the gradient
    in share one batch. At p = 2 one boundary: f + b + c, where 2 c were priced. The batch stays under (m + p - 1) x
    that micro-batch, what pp_comm and the bubble price."""
    f, b, c = 1.0, 2.0, 0.1
    slope = megatron_simulate(p, 41, f, b, c) - megatron_simulate(p, 40, f, b, c)
    assert slope == pytest.approx(f + b + exchanges * c, rel=1e-12)
    assert megatron_simulate(p, 40, f, b, c) <= (40 + p - 1) * (f + b + exchanges * c) + 1e-9


@pytest.mark.parametrize(("p", "layers"), [(4, (18, 24, 30)), (4, (24, 24, 24)), (8, (12, 12, 12)), (8, (9, 12, 15))])
def test_megatron_1f1b_end_ranks_exchange_on_one_boundary(p: int, layers: tuple[int, int, int]) -> None:
    """The first and the last rank exchange with one neighbour (their calls toward no neighbour move nothing), so
    at pp > 2 they pay one batched exchange a micro-batch, not the middle ranks' two; where an end rank is the
    busiest (the last with the logits and more layers) the step runs at its pace, t_f + t_b + 1 exchange. GPT-3 175B
    on DGX H100 nodes, tp 8: each rank's compute is the engine's own stage less its exposed pipeline traffic, c one
    boundary's exchange (its pp_comm over the middle rank's two), and the step-by-step simulation of Megatron's 1F1B
    over the p ranks with those times is what the engine's pipelined time (m + bubble) t_mb must give (the closed
    form is exact on these three-class stages without traffic, tests/test_pipeline_uneven.py)."""
    first_n, mid_n, last_n = layers
    tr = TrainingSpec(global_batch=32, micro_batch=1)
    job = build_job(load_cluster("dgx-h100"), load_workload("gpt3-175b"), tr)
    g = grid_from_strategy(StrategySpec(tp=8, pp=p, first_stage_layers=first_n, last_stage_layers=last_n), tr,
                           8 * p, job)
    res = evaluate(job, g)
    m = int(first(res.microbatches))
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp)
    # rank 0 holds the word embedding (its gradient and TP collective: docs/model.md#first-stage-embedding-grad,
    # #embedding-tp-comm)
    stages = [_stage(job, g, groups, np.asarray([float(n)]), lg, embedding=k == 0) for k, (n, lg) in
              enumerate([(first_n, False)] + [(mid_n, False)] * (p - 2) + [(last_n, True)])]
    c = first(stages[1].mp["pp"]) / 2.0  # a middle rank's two exchanges
    assert c > 0.0
    f, b = [], []
    for st in stages:
        work = first(st.time) - first(st.mp["pp"])
        share = first(st.compute["forward"]) / first(st.compute["total"])
        f.append(work * share)
        b.append(work * (1.0 - share))
    sim = megatron_simulate(p, m, f, b, c)
    pipelined = (m + first(res.extras["bubble_microbatches"])) * first(res.extras["microbatch_time"])
    assert pipelined == pytest.approx(sim, rel=1e-12)


@pytest.mark.parametrize("p", [3, 4, 8])
@pytest.mark.parametrize("end", [0, -1])
def test_a_busier_end_rank_paces_the_pipeline_with_one_boundary(p: int, end: int) -> None:
    """The first or the last rank twice as slow as the others: each added micro-batch costs its own f + b and the one
    boundary it exchanges on (Megatron one batched exchange c, nanotron 2 c + the mask's c_mask, DeepSpeed 2 c), not
    a middle rank's two (what mp['pp_edge'] takes off the end ranks, test above for Megatron on the engine)."""
    f = [1.0] * p
    f[end] = 2.0
    b = [2.0 * x for x in f]
    c, cm = 0.1, 0.01

    def slope(sim, *extra: float) -> float:  # type: ignore[no-untyped-def]
        return float(sim(p, 41, f, b, *extra) - sim(p, 40, f, b, *extra))

    assert slope(megatron_simulate, c) == pytest.approx(6.0 + c, rel=1e-12)
    assert slope(nanotron_simulate, c, cm) == pytest.approx(6.0 + 2 * c + cm, rel=1e-12)
    assert slope(ds_simulate, c) == pytest.approx(6.0 + 2 * c, rel=1e-12)


def _engine_and_schedule(cluster: str, model: str, tp: int, split: list[int] | int, m: int,
                         seq_len: int | None = None) -> tuple[object, float, float, float]:
    """(the result, the engine's pipelined time (m + bubble) t_mb, the step-by-step simulation of Megatron's 1F1B
    over the same ranks with every exchange a transfer, the simulated time one more micro-batch adds at this m): each
    rank's compute is the engine's own rank (rank 0 with the word embedding, the last with the logits) less its
    pipeline traffic, ``c`` one boundary's exchange (a middle rank's traffic over its two); the simulation gives the
    end ranks their one boundary by itself (megatron_program: their calls toward no neighbour move nothing).
    ``split``: the ranks' layers (strategy.stage_layers: every rank priced on its own), or the pipeline degree (the
    balanced split, priced by rank class: first, middle, last)."""
    tr = TrainingSpec(global_batch=m, micro_batch=1, **({"seq_len": seq_len} if seq_len else {}))
    job = build_job(load_cluster(cluster), load_workload(model), tr)
    if isinstance(split, int):
        p, given = split, None
        split = [job.shape.layers // p] * p
        assert sum(split) == job.shape.layers
    else:
        p, given = len(split), split
    g = grid_from_strategy(StrategySpec(tp=tp, pp=p, stage_layers=given), tr, tp * p, job)
    res = evaluate(job, g)
    assert int(first(res.microbatches)) == m
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp)
    stages = [_stage(job, g, groups, np.asarray([float(n)]), k == p - 1, embedding=k == 0) for k, n in enumerate(split)]
    c = first(_stage(job, g, groups, np.asarray([1.0]), False).mp["pp"]) / 2.0
    assert c > 0.0
    f, b = [], []
    for st in stages:
        work = first(st.time) - first(st.mp["pp"])
        share = first(st.compute["forward"]) / first(st.compute["total"]) if first(st.compute["total"]) > 0 else 1 / 3
        f.append(work * share)
        b.append(work * (1.0 - share))
    sim = megatron_simulate(p, m, f, b, c)
    pipelined = (m + first(res.extras["bubble_microbatches"])) * first(res.extras["microbatch_time"])
    return res, pipelined, sim, megatron_simulate(p, m + 1, f, b, c) - sim


#: (cluster, model, tp, stage_layers or the pipeline degree of a balanced split, which rank paces, seq_len)
PROFILES = [
    ("dgx-h100", "mistral-7b", 1, [0, 0, 0, 32], "last", 2048),  # prop37's counterexample: empty ranks before the last
    ("dgx-h100", "gpt3-175b", 8, [18, 24, 24, 30], "last", None),
    ("dgx-h100", "gpt3-175b", 8, [20, 28, 28, 20], "middle", None),
    ("dgx-h100", "gpt3-175b", 8, [30, 22, 22, 22], "first", None),
    ("dgx-h100", "gpt3-175b", 8, [8, 12, 12, 12, 12, 12, 12, 16], "last", None),
    ("dgx-h100", "gpt3-175b", 8, [12, 12, 13, 12, 12, 12, 12, 11], "middle", None),
    # balanced splits, priced by rank class: the logits outweigh one exchange over NVLink / InfiniBand (the last
    # paces), not over 25 GbE TCP, where a middle rank's second exchange is the larger (README's default scenario)
    ("dgx-h100", "gpt3-175b", 8, 4, "last", None),
    ("pcie-25gbe", "gpt-39b", 4, 8, "middle", None),
]


@pytest.mark.parametrize("m", [4, 16, 64])
@pytest.mark.parametrize(("cluster", "model", "tp", "split", "pace", "seq"), PROFILES)
def test_the_engine_pipeline_is_the_schedule_with_end_ranks_on_one_boundary(
        cluster: str, model: str, tp: int, split: list[int] | int, pace: str, seq: int | None, m: int) -> None:
    """The engine's pipelined time (m + bubble) t_mb against the step-by-step simulation of Megatron's 1F1B on each
    rank's own stage (stage_layers), the end ranks exchanging on one boundary, the middle ones on two, whichever rank
    paces (``pace``): exact on these profiles (cost.pipeline.one_f_one_b_time is exact for per-rank stage times since
    onefb39, and with the exchanges as rendezvous since rdv40, below). Before bubble37 the t_mb of a pacing end rank
    counted a middle rank's two exchanges while the schedule's paths took one, and the bubble clipped at 0 once m
    pp_edge exceeded the fill and the drain: the engine priced m (f + b + 2 c) where the schedule runs m (f + b + c) +
    fill + drain (prop37's split [0, 0, 0, 32] at m 16 and 64 over the simulation). The bubble, the fill and the drain,
    stays > 0 at every m. Over 25 GbE TCP (an exchange about as long as a rank's compute) the closed form was short of
    the simulation by 3.8 / 1.7 / 0.55 % at m 4 / 16 / 64 until rdv40 priced the exchanges as rendezvous
    (docs/model.md#onefb-rendezvous): exact on every profile now."""
    res, pipelined, sim, _ = _engine_and_schedule(cluster, model, tp, split, m, seq)
    assert pipelined <= sim * (1 + 1e-12)
    assert pipelined == pytest.approx(sim, rel=1e-12)
    assert first(res.breakdown["bubble"]) > 0.0


@pytest.mark.parametrize(("cluster", "model", "tp", "split", "pace", "seq"), PROFILES)
def test_t_mb_is_what_one_more_microbatch_adds_in_the_schedule(
        cluster: str, model: str, tp: int, split: list[int] | int, pace: str, seq: int | None) -> None:
    """The engine's t_mb (extras microbatch_time, the busiest rank's micro-batch) is what one more micro-batch adds to
    the simulated step at m = 64 (the steady state, paced by the slowest rank): an end rank's f + b + one exchange
    (its one boundary) where the first or the last rank paces, a middle rank's f + b + two where a middle rank does.
    Before bubble37 a pacing end rank's t_mb was c over it (a middle rank's second exchange); its pp_comm likewise."""
    res, _, _, slope = _engine_and_schedule(cluster, model, tp, split, 64, seq)
    assert first(res.extras["microbatch_time"]) == pytest.approx(slope, rel=1e-12)


# ---- dsend38: DeepSpeed's PipelineEngine, what each rank moves per micro-batch (partitioned activations over TP)
def deepspeed_rank_traffic(r: int, p: int, m: int, t: int, act: float) -> dict[str, float]:
    """Rank r's pipeline traffic over one TrainSchedule batch of m micro-batches at tp t > 1, ``act`` the bytes of
    one whole b s h activation: the schedule's instructions (tests/test_deepspeed_pipeline.py ``ds_commands``, a
    transcription of schedule.py) run through a transcription of the PipelineEngine's handlers
    (deepspeedai/DeepSpeed@edaa722126 deepspeed/runtime/pipe/engine.py; is_pipe_partitioned = is_grad_partitioned =
    tp > 1): SendActivation / SendGrad split the tensor with PartitionedTensor() (a local narrow) and p2p.send the
    rank's 1/t piece (after its small meta tensor, counted apart); RecvActivation / RecvGrad receive that piece;
    ForwardPass all-gathers the received input over TP unless the rank is the first (lines 731-738); BackwardPass
    returns at once on the last rank (lines 821-823), elsewhere all-gathers its own partitioned output and the
    received gradient (lines 835-857). Returns per-batch totals: sent / received bytes, sends / receives, meta
    messages, all-gathers and their bytes (the whole tensor each, the TP group's output)."""
    out = dict.fromkeys(("sent", "received", "sends", "receives", "meta", "gathers", "gathered"), 0.0)
    shard = act / t
    for op, _, _ in ds_commands(r, p, m):
        if op in ("send_act", "send_grad"):
            out["sends"] += 1
            out["sent"] += shard
            out["meta"] += 1
        elif op in ("recv_act", "recv_grad"):
            out["receives"] += 1
            out["received"] += shard
        elif op == "F" and r > 0:
            out["gathers"] += 1
            out["gathered"] += act
        elif op == "B" and r < p - 1:
            out["gathers"] += 2
            out["gathered"] += 2 * act
    return out


@pytest.mark.parametrize("p", [2, 3, 4, 8])
def test_deepspeed_ranks_move_what_the_engine_code_runs(p: int) -> None:
    """Per micro-batch, counted through the whole schedule: the first rank sends one shard (its output) and
    receives one (the gradient) and all-gathers twice (its output and that gradient before each backward); a middle
    rank moves 4 shards (2 each way) and all-gathers 3 times (also its received input before each forward); the last
    rank receives one shard and sends one back and all-gathers once (its input; its backward starts from the loss).
    At pp 2 the two ranks are the first and the last."""
    m, t, act = 12, 4, 1.0e6
    want = {"first": (1, 1, 2), "middle": (2, 2, 3), "last": (1, 1, 1)}
    for r in range(p):
        kind = "first" if r == 0 else "last" if r == p - 1 else "middle"
        sends, recvs, gathers = want[kind]
        c = deepspeed_rank_traffic(r, p, m, t, act)
        assert (c["sends"] / m, c["receives"] / m, c["gathers"] / m) == (sends, recvs, gathers), (r, c)
        assert c["sent"] / m == pytest.approx(sends * act / t, rel=1e-12)
        assert c["received"] / m == pytest.approx(recvs * act / t, rel=1e-12)
        assert c["gathered"] / m == pytest.approx(gathers * act, rel=1e-12)
        assert c["meta"] == c["sends"]  # a partitioned send is its meta tensor, then the piece


def _deepspeed_collectives(job, g):  # type: ignore[no-untyped-def]
    """(one shard's send/recv across the slowest stage boundary, one TP all-gather of the whole activation): the
    collective primitives (model_parallel_comm._mp_collectives' 'pp' and 'pp_gather'), checked by hand below."""
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp)
    coll_mp = _mp_collectives(job, g, groups)
    return first(coll_mp["pp"]), first(coll_mp["pp_gather"]), groups


@pytest.mark.parametrize(("pp", "dp"), [(4, 8), (2, 16), (8, 4)])
def test_deepspeed_end_ranks_priced_as_the_engine_code_counts(a100, pp: int, dp: int) -> None:  # type: ignore[no-untyped-def]
    """Each rank's pipeline traffic a micro-batch as the engine prices it (a middle rank's stage, the first rank
    through step._end_rank(first=True), the last through _end_rank) against the count above times one shard's
    send/recv and one TP all-gather: gpt-7.5b, tp 2 on DGX A100 nodes. Before dsend38 the end ranks kept a middle
    rank's 3 all-gathers (pp_edge took 2 shards off only) and at pp 2 every rank was priced with 3."""
    wl = load_workload("gpt-7.5b")
    tr = TrainingSpec(global_batch=8 * dp, micro_batch=1)
    job, g, _ = evaluated(a100, wl, tr, 2 * pp * dp, tp=2, pp=pp, deepspeed_pipeline=True)
    c, ag, groups = _deepspeed_collectives(job, g)
    act = wl.seq_len * wl.hidden * 2.0
    # by hand: the shard b s h x 2 / 2 over the stage boundary 2 dp GPUs apart (a 200 Gb/s HDR NIC at 0.96 where it
    # leaves the node, NVLink inside); the all-gather of b s h x 2 between 2 NVLink neighbours
    assert c == pytest.approx(first(coll.collective_time("sendrecv", act / 2, 2, job.network, stride=2 * dp)),
                              rel=1e-12)
    assert ag == pytest.approx(first(coll.collective_time("allgather", act, 2, job.network, stride=1)), rel=1e-12)
    m = 8
    counts = [deepspeed_rank_traffic(r, pp, m, 2, act) for r in range(pp)]
    priced = [_end_rank(_stage(job, g, groups, np.asarray([9.0]), False, embedding=True), first=True),
              *[_stage(job, g, groups, np.asarray([9.0]), False) for _ in range(pp - 2)],
              _end_rank(_stage(job, g, groups, np.asarray([9.0]), True))]
    for r, (cnt, st) in enumerate(zip(counts, priced, strict=True)):
        expected = (cnt["sends"] + cnt["receives"]) / m * c + cnt["gathers"] / m * ag
        assert first(st.mp["pp"]) == pytest.approx(expected, rel=1e-12), r


#: (stage_layers, the rank that paces): gpt3-175b on DGX H100 nodes, tp 8 (DeepSpeed's PipelineEngine)
DS_PROFILES = [([30, 22, 22, 22], 0), ([18, 24, 24, 30], 3), ([20, 28, 28, 20], 1), ([52, 44], 0), ([44, 52], 1),
               ([8, 12, 12, 12, 12, 12, 12, 16], 7)]


@pytest.mark.parametrize(("split", "pace"), DS_PROFILES)
def test_deepspeed_t_mb_is_what_one_more_microbatch_adds_in_the_train_schedule(split: list[int], pace: int) -> None:
    """The engine's t_mb (extras microbatch_time) against what one more micro-batch adds to the step-by-step
    simulation of DeepSpeed's TrainSchedule (tests/test_deepspeed_pipeline.py ``simulate``, blocking exchanges) at
    m = 64, every rank's compute the engine's own (its stage time less its pipeline traffic) plus the TP all-gathers
    the engine code runs on it (deepspeed_rank_traffic: a forward's 1 unless the first rank, a backward's 2 unless
    the last) and c one shard's send/recv: a pacing end rank adds f + b + 2 c + its own gathers (the first 2, the
    last 1), a middle rank f + b + 4 c + 3. Before dsend38 a pacing end rank's t_mb kept the middle rank's 3 gathers
    (the last 2 gathers over, the first 1) and at pp 2 either rank's all three."""
    m, p = 64, len(split)
    tr = TrainingSpec(global_batch=m, micro_batch=1)
    job = build_job(load_cluster("dgx-h100"), load_workload("gpt3-175b"), tr)
    g = grid_from_strategy(StrategySpec(tp=8, pp=p, stage_layers=split, deepspeed_pipeline=True), tr, 8 * p, job)
    res = evaluate(job, g)
    assert int(first(res.microbatches)) == m
    c, ag, groups = _deepspeed_collectives(job, g)
    f, b = [], []
    for k, n in enumerate(split):
        st = _stage(job, g, groups, np.asarray([float(n)]), k == p - 1, embedding=k == 0)
        work = first(st.time) - first(st.mp["pp"])
        share = first(st.compute["forward"]) / first(st.compute["total"])
        f.append(work * share + (ag if k > 0 else 0.0))
        b.append(work * (1.0 - share) + (2 * ag if k < p - 1 else 0.0))
    slope = ds_simulate(p, m + 1, f, b, c) - ds_simulate(p, m, f, b, c)
    comm = 2 * c * (1 if pace in (0, p - 1) else 2)
    assert slope == pytest.approx(f[pace] + b[pace] + comm, rel=1e-12)  # the pacing rank as expected
    assert first(res.extras["microbatch_time"]) == pytest.approx(slope, rel=1e-12)
