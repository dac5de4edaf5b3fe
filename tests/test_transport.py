"""Transport profiles (docs/model.md#transport): header efficiencies counted by hand from the standards, the
profile's alpha-beta effect on a hand-computed ring, monotonicity, registration amortisation, bad input."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from scalemodel.cost import transport
from scalemodel.cost.algorithms import algorithm_time
from scalemodel.cost.collectives import collective_time
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import place
from scalemodel.engine.network import build_network
from scalemodel.errors import InputError
from scalemodel.specs import load_cluster

# --- header efficiencies, byte by byte -----------------------------------------------------------


def test_tcp_1500_is_1448_of_1538() -> None:
    # IP packet 1500 = IPv4 20 + TCP 20 + timestamps 12 + 1448 payload; on the wire + Ethernet 14 + FCS 4
    # + preamble 8 + inter-frame gap 12 = 1538 bytes.
    payload, overhead = transport.packet_payload_and_overhead("tcp", 1500)
    assert payload == 1448 and payload + overhead == 1538
    assert transport.wire_efficiency("tcp", 1500) == pytest.approx(1448 / 1538, rel=1e-12)
    # without the timestamps option: 1460 / 1538
    assert transport.wire_efficiency("tcp", 1500, tcp_timestamps=False) == pytest.approx(1460 / 1538, rel=1e-12)
    # jumbo frames: 9000 - 52 = 8948 of 9038
    assert transport.wire_efficiency("tcp", 9000) == pytest.approx(8948 / 9038, rel=1e-12)


def test_roce_headers_and_path_mtu() -> None:
    # RoCE v2 on 1500-byte Ethernet: IB path MTU 1024 (1024 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 = 1068 fits,
    # 2048 + 44 does not); per packet Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4 + 20 = 82 B.
    assert float(transport.roce_path_mtu(1500)) == 1024
    assert float(transport.roce_path_mtu(9000)) == 4096
    assert float(transport.roce_path_mtu(4140)) == 4096 and float(transport.roce_path_mtu(4139)) == 2048
    assert transport.wire_efficiency("roce", 1500) == pytest.approx(1024 / 1106, rel=1e-12)
    assert transport.wire_efficiency("roce", 9000) == pytest.approx(4096 / 4178, rel=1e-12)


def test_infiniband_headers() -> None:
    # LRH 8 + BTH 12 + ICRC 4 + VCRC 2 = 26 bytes per packet
    assert transport.wire_efficiency("ib", 4096) == pytest.approx(4096 / 4122, rel=1e-12)
    assert transport.wire_efficiency("ib", 2048) == pytest.approx(2048 / 2074, rel=1e-12)


@pytest.mark.parametrize("name", ["tcp", "roce", "ib"])
def test_bigger_mtu_never_less_efficient(name: str) -> None:
    mtus = np.array(transport.IB_MTUS, dtype=float) if name == "ib" else np.arange(576.0, 9217.0, 1.0)
    e = transport.wire_efficiency(name, mtus)
    assert np.all(np.diff(e) >= 0) and np.all((e > 0) & (e < 1))


# --- the profile in the alpha-beta model ------------------------------------------------------------

def _net(**kw: object) -> Network:
    return Network((Tier("net", 8, 10e9, 5e-6, 0.9, **kw),), gpus_per_node=1)  # type: ignore[arg-type]


def test_ring_allreduce_with_tcp_profile_by_hand() -> None:
    # 8 ranks, 64 MiB, one 10 GB/s tier at efficiency 0.9, fabric hop 5 us, kernel TCP at MTU 1500:
    # alpha = 5 us + (84.7 - 11.25) / 2 us = 41.725 us; B = 10e9 x 0.9 x 1448 / 1538;
    # ring all-reduce = 2 (n - 1) alpha + 2 (n - 1) / n S / B.
    extra, wire = transport.profile("tcp", 1500)
    net = _net()
    tcp = replace(net, tiers=(replace(net.tiers[0], latency=5e-6 + extra, efficiency=0.9 * wire),))
    S, n = 64 * 2**20, 8
    alpha = 5e-6 + 36.725e-6
    bw = 10e9 * 0.9 * 1448 / 1538
    hand = 2 * (n - 1) * alpha + 2 * (n - 1) / n * S / bw
    assert float(algorithm_time("allreduce", "ring", np.asarray(float(S)), place(n, 1, tcp))) == pytest.approx(
        hand, rel=1e-9)


def test_build_network_applies_the_profile(tmp_path: Path) -> None:
    c = load_cluster("pcie-25gbe", ["tiers.tcp.transport=tcp", "tiers.tcp.latency=2.7us",
                                    "tiers.tcp.efficiency=1"])
    t = build_network(c).tiers[1]
    assert t.latency == pytest.approx(2.7e-6 + 36.725e-6, rel=1e-12)
    assert t.efficiency == pytest.approx(1448 / 1538, rel=1e-12)
    r = build_network(load_cluster("pcie-25gbe", ["tiers.tcp.transport=roce", "tiers.tcp.latency=2.7us",
                                                  "tiers.tcp.efficiency=1", "tiers.tcp.mtu=9000"])).tiers[1]
    assert r.latency == pytest.approx(2.7e-6) and r.efficiency == pytest.approx(4096 / 4178, rel=1e-12)
    # no transport: the catalog's end-to-end figures pass through untouched
    plain = build_network(load_cluster("pcie-25gbe", [])).tiers[1]
    assert plain.latency == pytest.approx(35e-6) and plain.efficiency == pytest.approx(0.62)


def test_rdma_faster_than_tcp_on_the_same_wire_for_small_messages() -> None:
    ex_t, w_t = transport.profile("tcp")
    ex_r, w_r = transport.profile("roce")
    base = Tier("net", 64, 3.125e9 / 8, 2.7e-6, 1.0)
    tcp = Network((replace(base, latency=base.latency + ex_t, efficiency=w_t),), 1)
    roce = Network((replace(base, latency=base.latency + ex_r, efficiency=w_r),), 1)
    small = collective_time("allreduce", 64 * 1024, 64, tcp) / collective_time("allreduce", 64 * 1024, 64, roce)
    assert float(small) > 2.0


# --- registration ---------------------------------------------------------------------------------

def test_registration_amortised_over_reuse() -> None:
    per_byte = 20.0 / 256e9  # ofiwg/libfabric#4738: > 20 s for 256 GB
    assert float(transport.registration_time(1e9)) == pytest.approx(1e9 * per_byte, rel=1e-12)
    assert float(transport.amortised_registration(1e9, 1)) == pytest.approx(0.078125, rel=1e-12)
    assert float(transport.amortised_registration(1e9, 10)) == pytest.approx(0.0078125, rel=1e-12)
    assert float(transport.amortised_registration(1e9, math.inf)) == 0.0
    r = transport.amortised_registration(1e9, np.array([1.0, 2.0, 4.0, 8.0]))
    assert np.all(np.diff(r) < 0)


def test_registration_enters_the_collective_only_where_not_amortised() -> None:
    once = _net(transport="ib")
    every = _net(transport="ib", registration_reuse=1.0)
    S = 256e6
    t_once = float(collective_time("allreduce", S, 8, once))
    t_every = float(collective_time("allreduce", S, 8, every))
    assert t_every - t_once == pytest.approx(S * 20.0 / 256e9, rel=1e-9)
    assert float(collective_time("allreduce", S, 1, every)) == 0.0
    # sockets register nothing
    tcp = _net(transport="tcp", registration_reuse=1.0)
    assert float(collective_time("allreduce", S, 8, tcp)) == pytest.approx(float(collective_time(
        "allreduce", S, 8, _net(transport="tcp"))), rel=1e-12)


# --- bad input --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("sets", "needle"), [
    (["tiers.tcp.transport=udp"], "transport"),
    (["tiers.tcp.transport=ib", "tiers.tcp.mtu=1500"], "256, 512, 1024, 2048, 4096"),
    (["tiers.tcp.transport=tcp", "tiers.tcp.mtu=100000"], "576 to 9216"),
    (["tiers.tcp.mtu=9000"], "need a transport"),
    (["tiers.tcp.transport=tcp", "tiers.tcp.registration_reuse=4"], "RDMA"),
    (["tiers.tcp.transport=roce", "tiers.tcp.registration_reuse=0.5"], "registration_reuse"),
])
def test_bad_transport_fields(sets: list[str], needle: str) -> None:
    with pytest.raises(InputError) as info:
        load_cluster("pcie-25gbe", sets)
    assert needle in info.value.message()


def test_bad_transport_on_the_command_line(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("collective", "--cluster", "pcie-25gbe", "--gpus", "64", "--size", "1MiB",
            "--set", "cluster.tiers.tcp.transport=udp")
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "tcp" in lines[0] and "roce" in lines[0]


def test_cost_functions_refuse_bad_values() -> None:
    with pytest.raises(InputError):
        transport.wire_efficiency("udp", 1500)
    with pytest.raises(InputError):
        transport.profile("ib", 1500)
    with pytest.raises(InputError):
        transport.registration_time(-1.0)
    with pytest.raises(InputError):
        transport.amortised_registration(1e6, 0.5)


def test_calibration_overlay_applies_the_profile_once(tmp_path: Path) -> None:
    """A tier that names a transport is fitted end to end; the overlay writes the fit without the profile,
    so the calibrated cluster's network tier carries exactly the fitted latency and effective bandwidth."""
    from scalemodel.cost.collectives import busbw_factor
    from scalemodel.engine.calibrate import fit_tier, overlay_yaml, parse_nccl_tests

    sets = ["tiers.tcp.transport=tcp", "tiers.tcp.latency=2.7us", "tiers.tcp.efficiency=0.9"]
    spec = load_cluster("pcie-25gbe", sets)
    net = build_network(spec)
    truth = replace(net, tiers=(net.tiers[0], replace(net.tiers[1], latency=60e-6, efficiency=0.5)))
    sizes = np.array([2.0**k for k in range(10, 31)])
    t = collective_time("allreduce", sizes, 16, truth, algorithm="ring", dtype_bytes=1)
    f = float(busbw_factor("allreduce", 16))
    rows = [f"{int(s):>14d} {int(s) // 4:>12d} float sum -1 {x * 1e6:>10.2f} {s / x / 1e9:.2f} "
            f"{s / x / 1e9 * f:.2f} 0 {x * 1e6:.2f} {s / x / 1e9:.2f} {s / x / 1e9 * f:.2f} 0"
            for s, x in zip(sizes, t, strict=True)]
    log = "\n".join(["# nThread 1 nGpus 1 minBytes 1024 maxBytes 1073741824 step: 2(factor) warmup iters: 5 "
                     "iters: 20 agg iters: 1 validation: 1 graph: 0",
                     "#       size         count      type   redop    root     time   algbw   busbw #wrong     time"
                     "   algbw   busbw #wrong", *rows])
    fit = fit_tier(parse_nccl_tests(log), net, cluster_name="pcie-25gbe", ranks=16, tier="tcp", algorithm="ring")
    path = tmp_path / "cal.yaml"
    path.write_text(overlay_yaml(fit, "synthetic", extends="pcie-25gbe"))
    cal = build_network(load_cluster(str(path), sets[:1])).tiers[1]
    assert cal.latency == pytest.approx(fit.latency_s, rel=1e-4)
    assert cal.bandwidth * cal.efficiency == pytest.approx(fit.effective_bandwidth_Bps, rel=1e-4)
    assert "names transport tcp" in path.read_text()


def test_tcp_transport_disables_ll128_like_a_tcp_protocol() -> None:
    from scalemodel.cost.nccl import protocols_for

    nvl = Tier("nvlink", 8, 300e9, 2e-6, 0.8, protocol="nvlink")
    ib = Tier("net", 64, 50e9, 3e-6, 0.9)
    assert "ll128" in protocols_for(Network((nvl, ib), 8))
    assert "ll128" not in protocols_for(Network((nvl, replace(ib, transport="tcp")), 8))
    assert "ll128" in protocols_for(Network((nvl, replace(ib, transport="roce")), 8))
