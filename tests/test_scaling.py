"""Scaling sweeps: exact efficiency bookkeeping, weak/strong batch rules, and the `scale` command."""

from __future__ import annotations

import csv
import io
import json
import os

import pytest

from scalemodel.errors import InputError

GPUS = [128, 256, 512, 1024, 2048]


def specs(cluster="pcie-25gbe", model="gpt-1.7b", sets=(), training=None, strategy=None):
    from scalemodel.commands.common import build_specs

    return build_specs(cluster=cluster, model=model, sets=list(sets), training=training or {},
                       strategy=strategy or {})


def run(mode="weak", gpus=GPUS, **kw):
    from scalemodel.engine.scaling import sweep

    cl, wl, tr, st = specs(**kw)
    return sweep(cl, wl, tr, st, gpus, mode)


# A hybrid layout whose DP degree grows from 8 to 128 (tp 2 x pp 8 = 16 GPUs per replica).
HYBRID = dict(strategy={"tp": 2, "pp": 8, "zero": "1"}, training={"micro_batch": 1, "global_batch": 64})


# --- exact bookkeeping --------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["weak", "strong"])
def test_attribution_sums_to_lost_efficiency(mode):
    batch = 64 if mode == "weak" else 1024  # strong: 1024 sequences still split over dp 128 at 2048 GPUs
    r = run(mode, strategy=HYBRID["strategy"], training={"micro_batch": 1, "global_batch": batch})
    first = r.points[0]
    assert first.scaling_efficiency == 1.0
    assert all(v == 0.0 for v in first.loss_attribution.values())
    for p in r.points:
        assert sum(p.loss_attribution.values()) == pytest.approx(1.0 - p.scaling_efficiency, rel=1e-12, abs=1e-14)


def test_efficiency_is_per_gpu_throughput_ratio_and_causes_from_breakdown():
    """Recompute E and one cause from the JSON numbers alone (tokens/s and breakdown_s)."""
    r = run("weak", **HYBRID)
    pts = r.payload()["points"]
    a, z = pts[0], pts[-1]
    e = (z["tokens_per_s"] / z["gpus"]) / (a["tokens_per_s"] / a["gpus"])
    assert z["scaling_efficiency"] == pytest.approx(e, rel=1e-9)
    # GPU-seconds per sample of the DP part, first and last point, over the last point's total
    t_last = z["step_time_s"] * z["gpus"] / z["global_batch"]
    dp_first = a["breakdown_s"]["dp_comm"] * a["gpus"] / a["global_batch"]
    dp_last = z["breakdown_s"]["dp_comm"] * z["gpus"] / z["global_batch"]
    assert z["loss_attribution"]["dp_comm"] == pytest.approx((dp_last - dp_first) / t_last, rel=1e-9)


def test_point_matches_predict_at_that_size():
    from scalemodel.engine.predict import predict

    r = run("weak", **HYBRID)
    p = r.points[2]  # 512 GPUs: global batch 64 x 512 / 128 = 256
    assert p.global_batch == 256
    cl, wl, tr, st = specs(strategy=HYBRID["strategy"], training={"micro_batch": 1, "global_batch": 256})
    ref = predict(cl, wl, 512, tr, st)
    assert p.prediction.step_time_s == pytest.approx(ref.step_time_s, rel=1e-12)


# --- weak and strong batch rules ----------------------------------------------------------------

def test_weak_keeps_per_replica_batch_and_rederives_dp():
    r = run("weak", **HYBRID)
    assert [p.gpus for p in r.points] == GPUS  # one point a count asked for: an empty sweep passed the loop
    for p in r.points:
        assert p.strategy["dp"] == p.gpus // 16
        assert p.global_batch == 64 * p.gpus // 128
        assert p.global_batch // p.strategy["dp"] == 8  # 64 / dp 8 at the first point


def test_weak_default_global_batch_is_dp_times_micro():
    r = run("weak", gpus=[128, 256], strategy={"tp": 2, "pp": 8}, training={"micro_batch": 2})
    assert [p.global_batch for p in r.points] == [8 * 2, 16 * 2]


def test_strong_keeps_global_batch_and_errors_when_unsplittable():
    r = run("strong", gpus=[128, 256, 512], **HYBRID)
    assert [p.global_batch for p in r.points] == [64, 64, 64]
    with pytest.raises(InputError, match="cannot be split over dp 128"):
        run("strong", gpus=[128, 2048], **HYBRID)  # 64 sequences over 2048 / 16 = 128 replicas


def test_weak_free_network_keeps_efficiency():
    """With every link ~free (1 PB/s, 1 ps) and no stragglers, weak scaling keeps per-GPU throughput:
    per-sample compute, bubble and p2p are unchanged with N, and only the per-collective base latency
    (constant in N) is left; ZeRO 0 keeps the optimizer step the same at every N.

    Tolerance 3e-3 (was 2e-3, fsdp18): NCCL's own constants are not link properties. Since the LL line is capped at
    NCCL's llMaxBw across nodes (docs/model.md#nccl-ll-cap), the gradient all-reduce here (about 200 MB over 8-128
    nodes) runs Tree Simple. That pays NCCL's per-level hop increment (hwLat Tree Simple - Ring LL, 14 - 2.7 us on
    the NET row) 2 log2(N) times however fast the links are: 0.21 % of the step at 2048 GPUs (0.04 % before).
    Tolerance 5e-3 (tree23): NCCL's per-channel Tree caps across nodes (docs/model.md#nccl-tree-caps) are per-CTA
    figures, not link properties: however fast the NIC, the Tree all-reduce runs at most 32 graph channels x
    perChMaxTreeBw (Ampere N4 17.8 GB/s) = 570 GB/s busbw (about 0.7 ms for these gradients), so the 8-replica
    baseline takes the free Ring and the larger runs the capped Tree: 0.27 % of the step at 256 GPUs, 0.43 % at
    2048."""
    free = [f"cluster.tiers.{t}.{k}={v}" for t in ("pcie", "tcp")
            for k, v in (("bandwidth", "1PB/s"), ("latency", "1e-12"))]
    kw = dict(strategy={"tp": 2, "pp": 8, "zero": "0"}, training={"micro_batch": 1, "global_batch": 64})
    fast = run("weak", sets=free, **kw)
    slow = run("weak", **kw)
    for p in fast.points:
        assert p.scaling_efficiency == pytest.approx(1.0, abs=5e-3)
    assert slow.points[-1].scaling_efficiency < fast.points[-1].scaling_efficiency - 0.02  # the network matters


@pytest.mark.parametrize("zero", ["0", "1"])
def test_strong_scaling_never_superlinear_with_a_fixed_strategy(zero):
    """Strong scaling, fixed tp/pp/cp and micro-batch b: per-sample compute is c_mb x tp pp cp / b at every
    N (the same micro-batches, spread over more replicas), and the other parts per sample can only grow
    (fewer micro-batches under the same bubble; the same gradient sync over fewer samples per GPU). So
    N x t(N) >= N0 x t(N0): efficiency <= 1, non-increasing, compute attribution 0, no cause a gain."""
    r = run("strong", gpus=[32, 64, 128, 256, 512], strategy={"tp": 2, "pp": 8, "zero": zero},
            training={"micro_batch": 1, "global_batch": 64}, cluster="dgx-a100")
    effs = [p.scaling_efficiency for p in r.points]
    for a, b in zip(r.points, r.points[1:], strict=False):
        assert b.gpus * b.prediction.step_time_s >= a.gpus * a.prediction.step_time_s * (1 - 1e-12)
    assert all(e <= 1.0 + 1e-12 for e in effs)
    assert all(b <= a + 1e-12 for a, b in zip(effs, effs[1:], strict=False))
    for p in r.points:
        assert p.loss_attribution["compute"] == pytest.approx(0.0, abs=1e-12)
        assert min(p.loss_attribution.values()) >= -1e-12
    # 64 sequences over dp 2 -> 32: 32 -> 2 micro-batches per replica under the same 7-micro-batch bubble
    assert r.points[-1].loss_attribution["bubble"] > 0


def test_statistical_efficiency_and_time_to_target_by_hand():
    """McCandlish: S = S_min (1 + B_noise/B). Target = loss after 1e9 tokens at B0 = 64, B_noise = 1000."""
    r = run("weak", gpus=[128, 1024], strategy={"tp": 2, "pp": 8},
            training={"micro_batch": 1, "global_batch": 64, "train_tokens": 1e9, "critical_batch": 1000})
    a, z = r.points
    assert a.batch_efficiency == pytest.approx(1.0)
    assert z.global_batch == 512
    assert z.batch_efficiency == pytest.approx((1000 + 64) / (1000 + 512))  # 0.70370
    e0 = 1e9 / 2048  # samples at the first point
    s_min = e0 / (1000 + 64)  # E0 = S_min (B_noise + B0)
    assert a.time_to_target_s == pytest.approx(s_min * (1 + 1000 / 64) * a.prediction.step_time_s)
    assert z.time_to_target_s == pytest.approx(s_min * (1 + 1000 / 512) * z.prediction.step_time_s)


def test_bad_inputs():
    with pytest.raises(InputError, match="mode"):
        run("sideways", gpus=[8])
    with pytest.raises(InputError, match="multiple of tp x pp x cp"):
        run("weak", gpus=[128, 200], **HYBRID)
    with pytest.raises(InputError, match="whole number"):
        run("weak", gpus=[128, 192], strategy={"tp": 1}, training={"global_batch": 1, "micro_batch": 1})


# --- chart ------------------------------------------------------------------------------------

def test_bar_segments_fill_the_width():
    from scalemodel.report.scale import bar_segments

    segs = bar_segments(0.6, {"dp_comm": 0.3, "bubble": 0.1, "optimizer": -0.05, "straggler": 0.05}, width=40)
    assert segs[0] == ("efficiency", 24)
    assert sum(n for _, n in segs) == 40
    assert segs[1][0] == "dp_comm" and segs[1][1] > segs[2][1]
    assert bar_segments(1.2, {"dp_comm": -0.2}, width=40) == [("efficiency", 40)]


# --- the command ------------------------------------------------------------------------------

def test_default_scenario_is_builtin():
    from scalemodel.specs import load_scenario
    from scalemodel.specs.loader import builtin_path

    path = builtin_path("scenario", "default")
    assert path is not None and os.path.basename(path) == "default.yaml"
    s = load_scenario("default")
    assert s.cluster.name.startswith("pcie-25gbe") and s.mode == "weak" and s.gpus[0] == 128 and s.gpus[-1] == 2048


def test_cli_default_shows_the_paradox(cli):
    res = cli("scale", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["command"] == "scale" and doc["mode"] == "weak" and "schema_version" in doc
    pts = doc["points"]
    assert [p["gpus"] for p in pts] == GPUS
    keys = {"gpus", "global_batch", "step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "scaling_efficiency",
            "loss_attribution", "breakdown_s", "strategy", "batch_efficiency", "time_to_target_s"}
    assert keys <= set(pts[0])
    # the paradox of the source document: per-GPU TFLOP/s falls by about a third from 128 to 2048 GPUs
    assert 0.55 < pts[-1]["tflops_per_gpu"] / pts[0]["tflops_per_gpu"] < 0.75
    table = cli("scale")
    assert table.code == 0 and "2048" in table.out and "█" in table.out and "dp_comm" in table.out


def test_cli_csv_rows_and_columns(cli):
    res = cli("scale", "--csv", "--gpus", "128,256", "--cluster", "pcie-25gbe", "--model", "gpt-1.7b",
              "--tp", "2", "--pp", "8", "--global-batch", "64")
    assert res.code == 0, res.err
    rows = list(csv.DictReader(io.StringIO(res.out)))
    assert [int(r["gpus"]) for r in rows] == [128, 256]
    assert float(rows[0]["scaling_efficiency"]) == 1.0
    assert "loss_dp_comm" in rows[0] and "dp_comm_s" in rows[0]
    total = sum(float(v) for k, v in rows[1].items() if k.startswith("loss_"))
    assert total == pytest.approx(1 - float(rows[1]["scaling_efficiency"]), abs=1e-9)


def test_cli_strong_mode_on_default_and_errors(cli):
    res = cli("scale", "--mode", "strong", "--json")
    assert res.code == 0, res.err
    pts = json.loads(res.out)["points"]
    assert len({p["global_batch"] for p in pts}) == 1
    assert cli("scale", "--mode", "sideways").code == 2
    assert cli("scale", "--json", "--csv").code == 2
    bad = cli("scale", "--plot", "curve.jpg")
    assert bad.code == 2 and "png or .svg" in bad.err
    assert cli("scale", "--gpus", "128,x").code == 2
    assert cli("scale", "--set", "nowhere.x=1").code == 2


def test_cli_best_uses_the_planner(cli):
    pytest.importorskip("scalemodel.engine.planner")
    res = cli("scale", "--best", "--json", "--cluster", "dgx-a100", "--model", "gpt-1.7b", "--gpus", "64,128",
              "--global-batch", "128")
    assert res.code == 0, res.err
    pts = json.loads(res.out)["points"]
    for p in pts:
        assert "memory_forced" in p["loss_attribution"]
        assert sum(p["loss_attribution"].values()) == pytest.approx(1 - p["scaling_efficiency"], abs=1e-9)


def test_summary_points_below_two_keep_a_decimal(cli):
    """Llama 3 70B, TP 8 x PP 4, weak 64 -> 16384 H100s: the summary read "dp_comm takes 1 points ...; contention
    takes 0 points" for losses the table prints as 1.0 and 0.1. Each cause's points are 100 x its loss_attribution
    at the last point, whole from 2 up and with one decimal below."""
    import json

    res = cli("scale", "-c", "dgx-h100", "-m", "llama3-70b", "--mode", "weak", "--gpus", "64,256,1024,4096,16384",
              "--global-batch", "64", "--tp", "8", "--pp", "4", "--sequence-parallel", "--zero", "1", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    loss = doc["points"][-1]["loss_attribution"]
    # sp32: the exposed output-gradient gathers (docs/model.md#sp-grad-gather) lengthen the step, so dp_comm's share
    # at 16384 GPUs falls 1.0 -> 0.9 points
    assert 0.0085 <= loss["dp_comm"] < 0.0095 and 0.0005 < loss["contention"] < 0.0095
    assert "dp_comm takes 0.9 points (" in doc["summary"]
    assert f"contention takes {100 * loss['contention']:.1f} points (" in doc["summary"]
    assert " 1 points" not in doc["summary"] and " 0 points" not in doc["summary"]


def test_best_summary_says_its_causes_are_the_memory_unconstrained_plans(cli):
    """`scale --best` GPT-3 175B strong 512 -> 1536 A100s at B 1536: the summary said "optimizer takes 2 points
    (optimizer step (memory-bound))" while the chosen ZeRO-2 strategy's optimizer step is milliseconds. The causes
    are U_k, the parts of the fastest strategy ignoring memory (scaling.py's docstring): at 1536 that one is ZeRO-0
    with an unsharded optimizer. The summary now says so and gives memory_forced, signed, as the attribution has it."""
    import json

    res = cli("scale", "--best", "-c", "dgx-a100", "-m", "gpt3-175b", "--mode", "strong", "--gpus", "512,1536",
              "--global-batch", "1536", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    last = doc["points"][-1]
    # sp32: since the row-parallel output-gradient gathers are priced exposed (docs/model.md#sp-grad-gather), the
    # memory-unconstrained fastest plan at 1536 is no longer the ZeRO-0 one whose optimizer step took 2 points
    # (optimizer attribution 0.024 -> 0.0000014); the chosen ZeRO-2 plan's optimizer step is still milliseconds
    assert last["breakdown_s"]["optimizer"] / last["step_time_s"] < 0.01
    assert "optimizer takes" not in doc["summary"]
    forced = 100 * last["loss_attribution"]["memory_forced"]
    assert "causes are the parts of the fastest strategy ignoring memory" in doc["summary"]
    assert f"memory_forced ({forced:+.1f} points)" in doc["summary"]
