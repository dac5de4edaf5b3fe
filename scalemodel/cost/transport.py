"""Transport profiles of a network tier: kernel TCP/IP over Ethernet, RoCE v2, InfiniBand (docs/model.md#transport).

A tier that names its ``transport`` states its ``latency`` as the NCCL-level hop latency of the network
with a kernel-bypass (verbs) transport and its ``efficiency`` as the share of line rate left after
everything *except* the transport's headers (e.g. staging through host memory). The profile then adds:

- **per-message software cost** (:func:`software_latency`), added to the tier's hop latency alpha, so an
  algorithm with ``m`` sequential messages per collective pays ``m x`` it (a ring all-reduce 2(n-1));
- **header and MTU overhead** (:func:`wire_efficiency`): the bandwidth term's beta is divided by
  ``payload / (payload + per-packet overhead)``;
- **memory registration** (:func:`registration_time`), for RDMA transports only, amortised over the
  collectives that reuse a registered buffer (:func:`amortised_registration`).

:func:`profile` gives a tier's (extra latency, wire efficiency) and :func:`registration_per_call` the
registration term of one collective on a placed group. A tier without ``transport`` keeps its latency and
efficiency as end-to-end measurements (every catalog tier: NCCL-level hop latencies and nccl-tests busbw,
which already contain the headers and the transport's software), and nothing is added.

All functions take plain floats or numpy arrays and broadcast; sizes in bytes, times in seconds.
"""

from __future__ import annotations

import math

import numpy as np

from scalemodel.choices import DEFAULT_MTU, IB_MTUS, RDMA_TRANSPORTS, check_mtu, check_transport
from scalemodel.errors import InputError

# ------------------------------------------------------------------------------------------------
# Per-packet header overhead (bytes). Arithmetic from the standards, checked by hand in tests.
# ------------------------------------------------------------------------------------------------

#: Ethernet per-frame cost on the wire: preamble 7 + start-of-frame delimiter 1 + minimum inter-frame gap
#: 12 = 20 B (IEEE 802.3 clause 4.4.2 and clause 3.2); MAC header: destination 6 + source 6 + EtherType 2
#: = 14 B, frame check sequence 4 B (IEEE 802.3 clause 3.2). No VLAN tag (802.1Q would add 4 B).
ETH_PREAMBLE_IFG = 20
ETH_HEADER = 14
ETH_FCS = 4
#: IPv4 header without options, 20 B (RFC 791 section 3.1).
IPV4_HEADER = 20
#: TCP header without options, 20 B (RFC 793 section 3.1), plus the timestamps option that Linux sends on every
#: segment by default (net.ipv4.tcp_timestamps = 1): 10 B option + 2 B NOP padding = 12 B (RFC 7323 section 3).
TCP_HEADER = 20
TCP_TIMESTAMPS = 12
#: UDP header, 8 B (RFC 768); RoCE v2 runs the InfiniBand transport over UDP port 4791 (InfiniBand
#: Architecture Specification vol. 1, annex A17 "RoCEv2").
UDP_HEADER = 8
#: InfiniBand headers (InfiniBand Architecture Specification vol. 1, ch. 5 "data packet format"):
#: local route header LRH 8 B, base transport header BTH 12 B, invariant CRC ICRC 4 B, variant CRC
#: VCRC 2 B. RoCE v2 carries BTH and ICRC but replaces LRH by Ethernet/IP/UDP and VCRC by the FCS.
#: Not counted: the 16 B RDMA extended transport header (RETH) on the first packet of an RDMA WRITE
#: (per message, not per packet), the 40 B global route header (GRH, only across IB subnets), the
#: acknowledgements flowing the other way, and IB's link-layer delimiters and idles.
IB_LRH = 8
IB_BTH = 12
IB_ICRC = 4
IB_VCRC = 2

# ------------------------------------------------------------------------------------------------
# Software and registration costs (seconds), each with its source
# ------------------------------------------------------------------------------------------------

#: Kernel TCP/IP stack cost per one-way message, on top of a kernel-bypass path on the same hardware:
#: RAMCloud's measurements on one 1 GbE network without a router, 10-byte payloads: a plain TCP client
#: 84.7 us round trip (interrupt coalescing off; 103.6 us on) against 11.25 us for a user-level driver
#: (libe1000) -> (84.7 - 11.25) / 2 = 36.725 us per one-way message
#: (https://ramcloud.atlassian.net/wiki/display/RAM/RPC+Performance+Numbers). A measurement of its era
#: (about 2010); no newer same-hardware kernel-vs-bypass pair for 25-400 GbE NICs was found, so none is
#: used. NCCL's own model has no separate socket figure: tuning.cc uses one NET hop row and one
#: NCCL_NET_OVERHEAD (1 us per network post on Intel, 2 us on AMD) for every network transport.
KERNEL_TCP_MESSAGE = (84.7e-6 - 11.25e-6) / 2.0
#: Extra per-message cost of RDMA verbs over the tier's hop latency: none. The hop latency a tier states is
#: NCCL's network hop (tuning.cc hwLatencies NET row, e.g. Ring LL 2.7 us, and NCCL_NET_OVERHEAD 1 us per
#: post), which NCCL's developers set for its IB/RoCE verbs transport (net_ib.cc serves both); adding a
#: verbs post/poll cost again would count it twice.
VERBS_MESSAGE = 0.0
#: Host-memory registration (ibv_reg_mr: pin the pages, write the NIC's translation table), seconds per
#: byte: more than 20 s for 256 GB through libfabric's verbs provider, which the maintainers called
#: normal (ofiwg/libfabric#4738) -> 20 / 256e9 = 7.8e-11 s/B (0.32 us per 4 KiB page). A smaller figure,
#: 114.5 us to register and deregister 4 MiB on one mlx5 port (2.7e-11 s/B), is in minio/minio-rs#236.
#: GPU memory (nvidia-peermem / dma-buf) has no published per-byte figure found here; the host figure is
#: used for both.
REGISTRATION_PER_BYTE = 20.0 / 256e9


def roce_path_mtu(eth_mtu: np.ndarray | float) -> np.ndarray:
    """RoCE v2's IB path MTU on an Ethernet MTU: the largest IB MTU whose packet (IPv4 20 + UDP 8 + BTH 12 +
    payload + ICRC 4 = payload + 44 B) fits the Ethernet MTU (IBA annex A17; 1500 -> 1024, 9000 -> 4096).
    0 where not even 256 fits."""
    room = np.asarray(eth_mtu, dtype=float) - (IPV4_HEADER + UDP_HEADER + IB_BTH + IB_ICRC)
    out = np.zeros_like(room)
    for m in IB_MTUS:
        out = np.where(room >= m, float(m), out)
    return out


def packet_payload_and_overhead(transport: str, mtu: np.ndarray | float, *, tcp_timestamps: bool = True
                                ) -> tuple[np.ndarray, np.ndarray]:
    """(payload bytes per full packet, bytes on the wire besides the payload) for ``transport`` at link MTU
    ``mtu`` (Ethernet MTU for tcp and roce, IB MTU for ib).

    - tcp: payload = MTU - IPv4 20 - TCP 20 (- 12 timestamps); overhead = MTU - payload + Ethernet 14 + FCS 4
      + preamble/IFG 20. MTU 1500 with timestamps: 1448 B of payload in 1538 B on the wire.
    - roce: payload = the IB path MTU (:func:`roce_path_mtu`); overhead = Ethernet 14 + IPv4 20 + UDP 8 +
      BTH 12 + ICRC 4 + FCS 4 + preamble/IFG 20 = 82 B.
    - ib: payload = MTU; overhead = LRH 8 + BTH 12 + ICRC 4 + VCRC 2 = 26 B.
    """
    check_transport(transport)
    m = np.asarray(mtu, dtype=float)
    if transport == "tcp":
        payload = m - IPV4_HEADER - TCP_HEADER - (TCP_TIMESTAMPS if tcp_timestamps else 0)
        overhead = (m - payload) + ETH_HEADER + ETH_FCS + ETH_PREAMBLE_IFG
    elif transport == "roce":
        payload = roce_path_mtu(m)
        overhead = np.full_like(m, float(ETH_HEADER + IPV4_HEADER + UDP_HEADER + IB_BTH + IB_ICRC + ETH_FCS
                                         + ETH_PREAMBLE_IFG))
    else:
        payload = m
        overhead = np.full_like(m, float(IB_LRH + IB_BTH + IB_ICRC + IB_VCRC))
    if np.any(payload <= 0):
        raise InputError(f"an MTU of {np.min(m):g} B leaves no payload for {transport}", where="mtu",
                         allowed=f"an MTU above the {transport} headers")
    return payload, overhead


def wire_efficiency(transport: str, mtu: np.ndarray | float, *, tcp_timestamps: bool = True) -> np.ndarray:
    """Share of the line rate that carries payload in a stream of full packets:

    ``e = payload / (payload + per-packet overhead)`` (:func:`packet_payload_and_overhead`):
    tcp at MTU 1500: 1448 / 1538 = 0.9415; at 9000: 8948 / 9038 = 0.9900; roce at Ethernet MTU 1500 (IB MTU
    1024): 1024 / 1106 = 0.9259; at 9000 (4096): 4096 / 4178 = 0.9804; ib at 4096: 4096 / 4122 = 0.9937.
    Sources: IEEE 802.3, RFC 791, 793, 768, 7323, InfiniBand Architecture Specification vol. 1 and annex A17
    (constants above). Non-decreasing in the MTU. A message's last, partial packet is not modelled (it adds
    at most one packet's overhead per message)."""
    payload, overhead = packet_payload_and_overhead(transport, mtu, tcp_timestamps=tcp_timestamps)
    return payload / (payload + overhead)


def software_latency(transport: str) -> float:
    """Per-message software cost the transport adds to the tier's hop latency (s): the kernel TCP/IP stack,
    :data:`KERNEL_TCP_MESSAGE` = 36.7 us, for tcp; :data:`VERBS_MESSAGE` = 0 for roce and ib (their cost is in
    NCCL's network hop latency). An algorithm that sends ``m`` sequential messages pays ``m x`` it."""
    check_transport(transport)
    return KERNEL_TCP_MESSAGE if transport == "tcp" else VERBS_MESSAGE


def profile(transport: str, mtu: float | None = None, *, tcp_timestamps: bool = True) -> tuple[float, float]:
    """(extra hop latency s, wire efficiency) of ``transport`` at link MTU ``mtu`` (default
    :data:`DEFAULT_MTU`): ``alpha_tier = latency + extra``, ``B_tier = bandwidth x efficiency x wire``."""
    check_transport(transport)
    m = check_mtu(transport, DEFAULT_MTU[transport] if mtu is None else mtu)
    return software_latency(transport), float(wire_efficiency(transport, m, tcp_timestamps=tcp_timestamps))


def registration_time(nbytes: np.ndarray | float, per_byte: float = REGISTRATION_PER_BYTE) -> np.ndarray:
    """Seconds to register ``nbytes`` of memory with the NIC: ``per_byte x bytes`` (linear in the pages pinned;
    :data:`REGISTRATION_PER_BYTE`, ofiwg/libfabric#4738). No fixed per-call term: none was found published
    with a source."""
    b = np.asarray(nbytes, dtype=float)
    if np.any(b < 0) or not np.all(np.isfinite(b)):
        raise InputError("bytes to register must be finite and >= 0", where="nbytes", allowed="bytes >= 0")
    return per_byte * b


def amortised_registration(nbytes: np.ndarray | float, reuse: np.ndarray | float,
                           per_byte: float = REGISTRATION_PER_BYTE) -> np.ndarray:
    """Registration cost per use of a buffer registered once and used ``reuse`` times:
    ``registration_time(bytes) / reuse``. ``reuse = inf`` (registered once for the job, as NCCL does with its
    internal buffers: a collective copies through buffers registered when the connection is set up, and
    user buffers only with ncclCommRegister) gives 0; ``reuse = 1`` (a framework that registers the tensor
    every step) the full cost."""
    r = np.asarray(reuse, dtype=float)
    if np.any(~(r >= 1.0)):
        raise InputError("uses per registration must be >= 1", where="registration_reuse",
                         allowed="a number >= 1, or none (registered once)")
    return np.where(np.isinf(r), 0.0, registration_time(nbytes, per_byte) / np.where(np.isinf(r), 1.0, r))


def registration_per_call(S: np.ndarray, tiers: tuple[object, ...], outer: np.ndarray) -> np.ndarray:
    """Registration cost of one collective of ``S`` bytes per rank whose outermost crossed tier is
    ``tiers[outer]``: :func:`amortised_registration` of S with that tier's ``registration_reuse`` when the tier
    names an RDMA transport, else 0. Each rank registers its own buffer, all at once."""
    out = np.zeros(np.broadcast(S, outer).shape)
    for i, t in enumerate(tiers):
        reuse = float(getattr(t, "registration_reuse", math.inf))
        if getattr(t, "transport", "") in RDMA_TRANSPORTS and math.isfinite(reuse):
            out = np.where(np.asarray(outer) == i, amortised_registration(S, reuse), out)
    return out
