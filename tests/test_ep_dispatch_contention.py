"""SMs the EP dispatcher occupies while its all-to-all hides under compute (StrategySpec.ep_dispatch_sms;
docs/model.md#contention), and the Blackwell NCCL channel count behind collective_units, both checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scalemodel.engine.job import build_job, collective_share, grid_from_strategy
from scalemodel.engine.planner import PIN_FIXED, pins
from scalemodel.engine.step import _with_free_windows, evaluate
from scalemodel.errors import InputError
from scalemodel.specs import TransformerWorkload, load_accelerator, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

QWEN3_30B = TransformerWorkload(name="qwen3-30b", layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128,
                                ffn_hidden=6144, gated_mlp=True, vocab=151936, seq_len=4096, tied_embeddings=False,
                                moe={"experts": 128, "top_k": 8, "ffn_hidden": 768})


def nccl_ring_execution_channels(links: int, link_bw: float, speeds: list[float], sm: int) -> int:
    """NCCL's ring channels on an NVSwitch node, walked by hand from src/graph/search.cc (v2.27.7): ncclTopoCompute
    tries each speed of the architecture's array from the first that fits, going down while the next speed is more
    than 0.49 of the best solution's, and keeps the solution with the most bandwidth (channels x speed; a tie keeps
    the earlier); ncclTopoDupChannels doubles it (speed >= 25 GB/s; on sm > 80 not when speed < 50 and more than
    4 channels); ncclTopoPostset (connect.cc) doubles again for execution."""
    total = links * link_bw
    i = next(k for k, s in enumerate(speeds) if s <= total)
    best_n, best_s = math.floor(total / speeds[i] + 1e-9), speeds[i]
    while i + 1 < len(speeds) and speeds[i + 1] / best_s > 0.49:
        i += 1
        n = math.floor(total / speeds[i] + 1e-9)
        if n * speeds[i] > best_n * best_s:
            best_n, best_s = n, speeds[i]
    dup = best_s >= 25.0 and not (sm > 80 and best_s < 50.0 and best_n > 4)
    return 2 * (2 * best_n if dup else best_n)


def test_nvidia_channel_counts_from_nccls_constants() -> None:
    sm80 = [40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0]
    sm90 = [60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0]
    sm100 = [90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0]
    # the counts docs/model.md derives and the NCCL logs show: HGX A100 24 ('Channel 23/24'), H800 16 ('16 coll
    # channels'), H100 24 ring channels
    assert nccl_ring_execution_channels(12, 20.0, sm80, 80) == 24
    assert nccl_ring_execution_channels(8, 20.6, sm90, 90) == 16
    assert nccl_ring_execution_channels(18, 20.6, sm90, 90) == 24
    # B200 / GB200: 18 NVLink5 links at SM100_NVLINK_BW 40.1 GB/s: 8 channels at 90 -> 16 -> 32
    assert nccl_ring_execution_channels(18, 40.1, sm100, 100) == 32
    for name, sms in (("b200", 148), ("gb200", 152)):  # enabled SMs (review28b: GB200 152, triton #2768)
        acc = load_accelerator(name)
        assert acc.collective_units == 32 and acc.compute_units == sms
        assert collective_share(acc) == pytest.approx(32 / sms, rel=1e-12)


def test_free_windows_charge_each_hidden_part_at_its_own_share() -> None:
    """Forward hides 1 s of TP and 2 s of EP, backward 4 s of TP and 1 s of EP: with NCCL's share 0.1 and the
    dispatcher's 0.25, contention = 0.1 x 5 + 0.25 x 3 = 1.25 s; the free windows lose all hidden traffic."""
    comp = {"forward": np.array([10.0]), "backward": np.array([20.0])}
    mp = {"hidden_fwd": np.array([3.0]), "hidden_bwd": np.array([5.0]), "hidden_ep": np.array([3.0])}
    out = _with_free_windows(comp, mp, 0.1, np.array([0.25]))
    assert float(out["contention"][0]) == pytest.approx(1.25, rel=1e-12)
    assert float(out["forward_free"][0]) == 7.0 and float(out["backward_free"][0]) == 15.0
    # no dispatcher share given: every hidden second at the collective library's
    assert float(_with_free_windows(comp, mp, 0.1)["contention"][0]) == pytest.approx(0.8, rel=1e-12)


def _run(sms: int | None, overlap: bool = True, flex: bool = False):
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), QWEN3_30B, tr)
    st = StrategySpec(tp=8, ep=8, etp=1, pp=2, schedule="interleaved:2", moe_a2a_overlap=overlap,
                      sequence_parallel=True,  # Megatron-Core needs SP for MoE at tp > 1 (test_moe_sp_required.py)
                      ep_dispatch_sms=sms, moe_flex_dispatcher=flex)
    g = grid_from_strategy(st, tr, 16, job)
    return job, g, evaluate(job, g)


def test_hidden_ep_time_costs_the_dispatchers_sm_share() -> None:
    """Hidden EP time H (exposed ep_comm without overlap minus with it), dispatcher on n of the H100's 132 SMs:
    the step's contention grows by n/132 x H over the run without overlap; 0 SMs add nothing; unset is NCCL's
    all-to-all on the ring channels, 24/132 (nvlsshare26: NVLS on keeps the rings' 24, ncclTopoPostset)."""
    _, _, off = _run(None, overlap=False)
    hidden = float(off.breakdown["ep_comm"][0])
    base = float(off.breakdown["contention"][0])
    for sms, share in ((32, 32 / 132), (0, 0.0), (None, 24 / 132), (132, 1.0)):
        _, _, on = _run(sms)
        h = hidden - float(on.breakdown["ep_comm"][0])
        assert h > 0
        assert float(on.breakdown["contention"][0]) - base == pytest.approx(share * h, rel=1e-9, abs=1e-12)
        # physics: never more than the share of the compute under it
        assert float(on.breakdown["contention"][0]) - base <= share * float(on.breakdown["compute"][0]) + 1e-12


def test_flex_dispatcher_without_a_count_costs_megatron_cores_deepep_default() -> None:
    """The flex dispatcher with no SM count runs DeepEP, its default backend, on 20 SMs (Megatron-LM d98e8a64dd
    token_dispatcher.py L1287-1292: set_deepep_num_sms(... else 20)), not NCCL's 16 channels: its hidden EP time H
    costs 20/132 x H on the H100, exactly what ep_dispatch_sms = 20 costs."""
    _, _, off = _run(None, overlap=False, flex=True)
    hidden = float(off.breakdown["ep_comm"][0])
    base = float(off.breakdown["contention"][0])
    _, _, on = _run(None, flex=True)
    h = hidden - float(on.breakdown["ep_comm"][0])
    assert h > 0
    assert float(on.breakdown["contention"][0]) - base == pytest.approx(20 / 132 * h, rel=1e-9, abs=1e-12)
    assert float(on.step_time[0]) == float(_run(20, flex=True)[2].step_time[0])


def test_more_dispatcher_sms_never_make_the_step_faster() -> None:
    steps = [float(_run(n)[2].step_time[0]) for n in (0, 8, 16, 24, 32, 64)]
    assert all(a <= b for a, b in zip(steps, steps[1:], strict=False))


def test_ep_dispatch_sms_checked_echoed_and_pinnable() -> None:
    _, g, _ = _run(24)
    assert g.describe(0)["ep_dispatch_sms"] == 24
    assert _run(None)[1].describe(0)["ep_dispatch_sms"] is None
    with pytest.raises(InputError, match="exceeds the 132 compute units"):
        _run(200)
    assert "ep_dispatch_sms" in PIN_FIXED
    _cons, fixed, _sync = pins(StrategySpec(ep_dispatch_sms=32), ["ep_dispatch_sms"])
    assert fixed == {"ep_dispatch_sms": 32}


def test_a_flex_launch_without_a_count_prices_its_backends_own_default(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A Megatron-LM launch with the flex dispatcher and no SM flag: the step equals the same launch with
    ``ep_dispatch_sms = 20`` (Megatron-Core's DeepEP default); under hybridep, HybridEP's own default (DeepEP
    hybrid-ep config.cuh L366-367: 24 in one NVLink domain, 8 across): tp 2 x ep 8 on DGX-H100 nodes of 8 GPUs is
    an EP group of 8 ranks 2 GPUs apart, over 16 GPUs, two NVLink domains, so 8 SMs."""
    import json

    from test_hostile_inputs_round14c import MOE, _launch
    f = _launch(tmp_path, "--global-batch-size 512")  # 8 micro-batches a rank: the all-to-all hides under compute
    r = cli("predict", *MOE, "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    got = json.loads(r.out)
    step = {n: json.loads(cli("predict", *MOE, "--strategy", str(f), "--set", f"strategy.ep_dispatch_sms={n}",
                              "--json").out)["step_time_s"] for n in (16, 20)}
    assert step[16] < step[20] == got["step_time_s"]  # 20 SMs, not NCCL's 16 channels on the H100
    assert "hybridep" not in r.err
    g = _launch(tmp_path, "--global-batch-size 512 --moe-flex-dispatcher-backend hybridep")
    r = cli("predict", *MOE, "--strategy", str(g), "--json")
    assert r.code == 0 and "hybridep" not in r.err, r.err
    hyb = {n: json.loads(cli("predict", *MOE, "--strategy", str(g), "--set", f"strategy.ep_dispatch_sms={n}",
                             "--json").out)["step_time_s"] for n in (8, 24)}
    assert json.loads(r.out)["step_time_s"] == hyb[8] < hyb[24]
