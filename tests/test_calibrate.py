"""nccl-tests parsing in every historical format and the calibration fit (recovers known parameters)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from scalemodel.cost.collectives import busbw_factor, collective_time
from scalemodel.cost.network import Network, Tier
from scalemodel.engine.calibrate import fit_tier, infer_ranks, overlay_yaml, parse_nccl_tests
from scalemodel.engine.job import build_network

DATA = Path(__file__).parent / "data" / "nccl"
REF = Path(__file__).resolve().parents[2] / "shared" / "reference" / "hardware_and_formats.md"

NVL = Tier("nvlink", 8, 300e9, 2e-6, efficiency=0.77, protocol="nvlink")
IB = Tier("ib-leaf", 160, 25e9, 3.5e-6, efficiency=0.96, protocol="rdma")
NET = Network((NVL, IB), 8)
TRUE_LAT, TRUE_BEFF = 3.1e-6, 205e9  # the "real" NVLink tier behind the synthetic logs


def _true_times(sizes: np.ndarray, ranks: int = 8, noise: float = 0.0) -> np.ndarray:
    net = Network((replace(NVL, latency=TRUE_LAT, bandwidth=TRUE_BEFF, efficiency=1.0), IB), 8)
    t = collective_time("allreduce", sizes, ranks, net, algorithm="ring", dtype_bytes=1)
    rng = np.random.default_rng(11)
    return t * (1 + noise * rng.standard_normal(t.shape))


def _fmt(x: float) -> str:
    return f"{x:.2f}" if x < 1e4 else f"{x:.0f}"


def make_log(era: str, sizes: np.ndarray, times: np.ndarray, ranks: int = 8) -> str:
    """A log as nccl-tests of that era prints it (util.cu formats; docs/model.md#nccl-tests-logs)."""
    f = float(busbw_factor("allreduce", ranks))
    lines = []
    if era == "current":
        lines += ["# nccl-tests version 2.20.0 (b4d5bee) nccl-headers=23102 nccl-library=23102",
                  "# Collective test starting: all_reduce_perf"]
    hdr = ("# nThread 1 nGpus 1 minBytes 1024 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 "
           + ("validation: 1" if era == "older" else "agg iters: 1 validation: 1 graph: 0")
           + (" unalign: 0" if era == "current" else ""))
    lines += [hdr, "#", "# Using devices"]
    for r in range(ranks):
        if era == "older":
            lines.append(f"#   Rank {r:2d} Pid {1000 + r:6d} on   node01 device {r:2d} [0x{r:02x}] A100-SXM4-80GB")
        else:
            lines.append(f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on     node01 device {r:2d} [0000:{r:02x}:00] "
                         "NVIDIA A100-SXM4-80GB")
    lines.append("#")
    if era == "older":
        lines.append("#       size         count      type   redop     time   algbw   busbw  error     time   algbw"
                     "   busbw  error")
    else:
        lines.append("#       size         count      type   redop    root     time   algbw   busbw #wrong     time"
                     "   algbw   busbw #wrong")
    for s, t in zip(sizes, times, strict=True):
        us = t * 1e6
        alg = s / t / 1e9
        bus = alg * f
        t_ip = us * 0.99
        block = f"  {_fmt(us):>7s}  {alg:6.2f}  {bus:6.2f}"
        block_ip = f"  {_fmt(t_ip):>7s}  {s / (t_ip * 1e-6) / 1e9:6.2f}  {s / (t_ip * 1e-6) / 1e9 * f:6.2f}"
        head = f"{int(s):12d}  {int(s) // 4:12d}  {'float':>8s}  {'sum':>6s}"
        if era == "older":
            lines.append(head + block + "  0e+00" + block_ip + "  4e-07")
        else:
            lines.append(head + f"  {-1:6d}" + block + f"  {0:6g}" + block_ip + f"  {'N/A':>6s}")
        if era == "middle":  # interleaved NCCL INFO lines, as real runs print
            lines.append("node01:1234:1240 [0] NCCL INFO comm 0x55 rank 0 nranks 8 - Init COMPLETE")
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 42.1", "#"]
    if era == "current":
        lines.append("# Collective test concluded: all_reduce_perf")
    if era == "middle":  # srun -l prefixes on every line
        lines = [f"0: {x}" for x in lines]
    if era == "older":  # mpirun --tag-output prefixes
        lines = [f"[1,0]<stdout>:{x}" for x in lines]
    return "\n".join(lines) + "\n"


def make_json(sizes: np.ndarray, times: np.ndarray, ranks: int = 8) -> str:
    f = float(busbw_factor("allreduce", ranks))
    res = [{"size": int(s), "count": int(s) // 4, "type": "float", "redop": "sum", "root": -1,
            "out_of_place": {"time": t * 1e6, "alg_bw": s / t / 1e9, "bus_bw": s / t / 1e9 * f, "nwrong": 0},
            "in_place": {"time": t * 1e6, "alg_bw": s / t / 1e9, "bus_bw": s / t / 1e9 * f, "nwrong": 0}}
           for s, t in zip(sizes, times, strict=True)]
    return json.dumps({"config": {"test": "all_reduce"}, "devices": [{"rank": r} for r in range(ranks)],
                       "results": res, "average_bus_bandwidth": 42.0, "out_of_bounds": 0})


SIZES = 2.0 ** np.arange(10, 34)


@pytest.mark.parametrize("era", ["older", "middle", "current", "json"])
def test_parse_every_format(era: str) -> None:
    t = _true_times(SIZES)
    text = make_json(SIZES, t) if era == "json" else make_log(era, SIZES, t)
    log = parse_nccl_tests(text)
    assert log.op == "allreduce"
    assert log.ranks == 8
    assert [r.size_bytes for r in log.rows] == list(SIZES)
    # times survive the 2-decimal printing to within 0.5 % (1 KiB rows print ~10 us as "10.xx")
    got = np.array([r.time_oop_s for r in log.rows])
    assert np.allclose(got, t, rtol=5e-3)


@pytest.mark.parametrize("era", ["older", "middle", "current", "json"])
def test_fit_recovers_known_parameters(era: str) -> None:
    t = _true_times(SIZES, noise=0.01)
    text = make_json(SIZES, t) if era == "json" else make_log(era, SIZES, t)
    fit = fit_tier(parse_nccl_tests(text), NET, cluster_name="dgx-a100", ranks=8)
    assert fit.tier == "nvlink"
    assert fit.latency_s == pytest.approx(TRUE_LAT, rel=0.05)
    assert fit.effective_bandwidth_Bps == pytest.approx(TRUE_BEFF, rel=0.02)
    assert fit.efficiency == pytest.approx(TRUE_BEFF / 300e9, rel=0.02)
    assert max(abs(r["error"]) for r in fit.residuals) < 0.05


def test_infer_ranks_from_busbw_ratio() -> None:
    t = _true_times(SIZES, ranks=16)
    log = parse_nccl_tests("\n".join(x for x in make_log("current", SIZES, t, ranks=16).splitlines()
                                     if "Rank" not in x))
    assert log.ranks is None
    assert infer_ranks(log) == 16


def _ref_block(start: str, end: str) -> str:
    text = REF.read_text()
    i = text.index(start)
    return text[i:text.index(end, i)]


@pytest.mark.skipif(not REF.exists(), reason="reference sheet not available")
def test_published_rows_from_reference() -> None:
    older = parse_nccl_tests(_ref_block("(older, NVIDIA/nccl#1244", "(middle,"))
    assert len(older.rows) == 1 and older.rows[0].size_bytes == 4
    assert older.rows[0].time_oop_s == pytest.approx(47.54e-6)
    assert older.rows[0].time_ip_s == pytest.approx(49.35e-6)
    middle = parse_nccl_tests(_ref_block("(middle, NVIDIA/nccl-tests#232", "(current,"))
    assert [r.size_bytes for r in middle.rows] == [2097152, 33554432]
    assert middle.rows[1].time_oop_s == pytest.approx(812.3e-6)
    assert middle.rows[1].busbw_ip_Bps == pytest.approx(41.52e9)
    current = parse_nccl_tests(_ref_block("(current, NVIDIA/dgx-spark", "```"))
    assert current.op == "allreduce"
    assert [r.time_oop_s for r in current.rows] == pytest.approx([35.15e-6, 31.67e-6])
    # 2 nodes x 1 H100 over 4 NICs (nccl-tests#232): fit the network tier from the two published rows.
    net = Network((Tier("nvlink", 1, 450e9, 2e-6, 0.82, protocol="nvlink"),
                   Tier("ib", 1024, 200e9, 5e-6, 0.94, protocol="rdma")), 1)
    fit = fit_tier(middle, net, cluster_name="x", ranks=2, algorithm="ring")
    assert fit.tier == "ib"
    # busbw = algbw for n = 2; the large row says ~41.4 GB/s; the fit's bandwidth must be near it
    assert 35e9 < fit.effective_bandwidth_Bps < 50e9
    assert max(abs(r["error"]) for r in fit.residuals) < 0.15


def test_overlay_is_loadable(tmp_path: Path) -> None:
    from scalemodel.specs import load_cluster

    t = _true_times(SIZES)
    spec = load_cluster("dgx-a100")
    fit = fit_tier(parse_nccl_tests(make_log("current", SIZES, t)), build_network(spec), cluster_name="dgx-a100",
                   ranks=8)
    path = tmp_path / "overlay.yaml"
    path.write_text(overlay_yaml(fit, "synthetic"))
    cal = load_cluster(str(path))
    tier = next(x for x in cal.tiers if x.name == "nvlink")
    assert tier.latency == pytest.approx(fit.latency_s, rel=1e-5)
    assert tier.bandwidth * tier.efficiency == pytest.approx(fit.effective_bandwidth_Bps, rel=1e-5)
    assert [x.name for x in cal.tiers] == [x.name for x in spec.tiers]


def test_cli_calibrate(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ar.log"
    log.write_text(make_log("middle", SIZES, _true_times(SIZES)))
    out = tmp_path / "o.yaml"
    r = cli("calibrate", "nccl-tests", str(log), "--cluster", "dgx-a100", "--out", str(out), "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["command"] == "calibrate" and doc["fit"]["tier"] == "nvlink"
    assert doc["fit"]["latency_s"] == pytest.approx(TRUE_LAT, rel=0.05)
    assert out.read_text().startswith("# Calibrated")
    r = cli("calibrate", str(log), "--cluster", "dgx-a100")
    assert r.code == 0 and "residuals" in r.out
    bad = tmp_path / "bad.log"
    bad.write_text("nothing here\n")
    r = cli("calibrate", "nccl-tests", str(bad), "--cluster", "dgx-a100")
    assert r.code == 2 and r.err.startswith("error: ")
    r = cli("calibrate", "nccl-tests", str(log), "--cluster", "dgx-a100", "--tier", "nope")
    assert r.code == 2 and "nvlink" in r.err


def test_committed_synthetic_logs() -> None:
    """tests/data/nccl/ holds logs written by make_log/make_json (1 % noise, true NVLink tier 3.1 us, 205 GB/s)."""
    files = sorted(DATA.glob("synthetic_*"))
    assert len(files) == 4
    for f in files:
        fit = fit_tier(parse_nccl_tests(f.read_text()), NET, cluster_name="dgx-a100", ranks=8)
        assert fit.latency_s == pytest.approx(TRUE_LAT, rel=0.05), f.name
        assert fit.effective_bandwidth_Bps == pytest.approx(TRUE_BEFF, rel=0.02), f.name
