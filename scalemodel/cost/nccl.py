"""NCCL's own model on top of the alpha-beta algorithms: protocols, base latencies, channels, ``auto``.

Constants from NVIDIA/nccl v2.30.7 ``src/graph/tuning.cc``, ``enqueue.cc``, ``device.h``, ``comm.h``
(docs/model.md#nccl). For one algorithm on a placed group (:class:`~scalemodel.cost.placement.Placement`):

- protocol lines: the time is the minimum over LL, LL128 and Simple (LL128 only where no tier is
  PCIe/TCP, :func:`protocols_for`) of ``base[algorithm][proto] + T_algo(S_eff)`` on the group's links as
  that protocol sees them: hop latency ``alpha = Tier.latency + hwLat[link][algorithm][proto] -
  hwLat[link][ring][LL]`` (:func:`hop_latency`) and the Ring bandwidth factors LL x0.5, LL128 x0.92,
  Simple x1. The links are swapped on the same placement; the group is not placed again;
- channel ramp (:func:`channel_ramp_size`): below ``S_full = nc nt threshold`` NCCL drops
  channels, then threads, so the bandwidth term is charged ``S_eff = min(S / r_min, max(S, S_full))``
  bytes, with ``nc = clip(busbw / 20 GB/s, 1, 64)`` (:func:`nccl_channels`);
- NCCL's Tree all-reduce (:func:`nccl_tree_allreduce_time`): intra-node chain plus double
  binary trees across nodes, ``algbw = 0.5 x 0.92 x f_proto x busbw x treeCorrectionFactor(S)``;
- Ring Simple all-reduce across nodes: latency x1.4 once ``S / (nChannels p) >= 64`` B (the "plateau");
- ``auto`` (:func:`best_algorithm`, :func:`collective_time`): the fastest algorithm of the family
  (:func:`resolve_family`); on GPU clusters only what NCCL implements (ring, tree; NVLS/NVLSTree/CollNetChain
  as ``hierarchical`` where in-network reduction applies, :func:`inr_applies`; ``direct`` for all-to-all
  and send/recv; reduce-scatter/all-gather also NVLS as ``hierarchical`` on one NVLink-SHARP domain and PAT as
  ``rd`` at one GPU per node, :func:`nccl_nvls_gather_time`, :func:`nccl_pat_time`), every applicable algorithm on
  TPU/ICI;
- in-network reduction (:func:`nccl_inr_allreduce_time`, docs/model.md#in-network-reduction): NCCL's NVLS,
  NVLSTree and CollNetChain all-reduce, Simple only, with their own latencies (25 us NVLS), nvlsEfficiency
  per generation, NVLSTree per-channel caps and the NVLS chunk pipeline.

Sources: NVIDIA/nccl v2.30.7 (commit 5067397) src/graph/tuning.cc (base and per-hop latencies, protocol
bandwidth factors, treeCorrectionFactor, plateau, NVLS efficiency), src/enqueue.cc (channel/thread
reduction), src/include/device.h and comm.h (threads, thresholds, MAXCHANNELS), src/graph/topo.h
(per-channel NVLink bandwidth); nccl#457 (Tree algBw); nccl-tests#123 (measured LL ring hop).
See docs/model.md#nccl.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np

from scalemodel.choices import NVLINK_CLASS, PCI_CLASS
from scalemodel.cost import algorithms, topology
from scalemodel.cost.algorithms import ALGO_FUNCS, APPLICABLE, TREE_FLOWS, allowed, busbw_factor, log2_floor
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import Placement
from scalemodel.errors import InputError

#: The NCCL release the constants below are read from (docs/model.md#nccl: "A model should record
#: which NCCL version its constants come from").
NCCL_VERSION = "2.30.7"
PROTOCOLS: tuple[str, ...] = ("ll", "ll128", "simple")
_PI = {"ll": 0, "ll128": 1, "simple": 2}
#: baseLatencies[algorithm][protocol] in seconds, order LL / LL128 / Simple (tuning.cc).
NCCL_BASE_LATENCY: dict[str, tuple[float, float, float]] = {
    "ring": (6.6e-6, 14.0e-6, 8.4e-6),
    "tree": (6.8e-6, 14.0e-6, 8.4e-6),
}
#: Per-collective base latency of the Ring row, also used for the non-NCCL algorithms (rhd, rd, direct,
#: hierarchical), which are charged the same launch/base cost as NCCL's ring (modelling assumption).
BASE_LATENCY: dict[str, float] = dict(zip(PROTOCOLS, NCCL_BASE_LATENCY["ring"], strict=True))
#: hwLatencies[link][algorithm][protocol] in seconds, LL / LL128 / Simple (tuning.cc).
NCCL_HW_LATENCY: dict[str, dict[str, tuple[float, float, float]]] = {
    "nvlink": {"ring": (0.6e-6, 1.9e-6, 3.4e-6), "tree": (0.6e-6, 1.25e-6, 4.0e-6)},
    "pci": {"ring": (1.0e-6, 2.5e-6, 5.7e-6), "tree": (1.0e-6, 1.9e-6, 4.0e-6)},
    "net": {"ring": (2.7e-6, 4.0e-6, 14.0e-6), "tree": (5.0e-6, 8.5e-6, 14.0e-6)},
}
#: NCCL's network post overhead per ring step (getNetOverhead, NVIDIA/nccl v2.27.7-1 593de54e src/graph/tuning.cc,
#: unchanged from v2.21.5-1 to v2.28.9-1): NCCL_NET_OVERHEAD if set, else 1 us on Intel x86 and on non-x86 hosts,
#: 2 us on AMD x86. "Inter-node rings still have to launch nsteps * net overhead": a Ring all-reduce /
#: reduce-scatter / all-gather with nNodes > 1 charges its intra-node steps max(intraLat, netOverhead), x3 with
#: Simple (not Ring broadcast/reduce, Tree, NVLS, CollNet or p2p). The default when a tier states none
#: (Tier.net_overhead; docs/model.md#ring-net-overhead). The same at v2.30.7-1 (73cf1122). A cluster whose
#: ``host_cpu`` is ``amd`` takes :data:`NET_OVERHEAD_AMD` (:func:`net_overhead_default`).
NET_OVERHEAD = 1.0e-6
NET_OVERHEAD_AMD = 2.0e-6
NET_OVERHEAD_SIMPLE = 3.0
#: Ring bandwidth per protocol relative to Simple (tuning.cc table): LL moves 8 B of data per
#: 16 B line (x0.5); LL128 x0.92 (comment "120/128"); Simple 1. The LL cap llMaxBw applies on one node (by GPU,
#: :data:`NCCL_LL_MAX_BW_ONE_NODE`) and across nodes (by host, :data:`NCCL_LL_MAX_BW_MULTI_NODE`); the per-channel
#: cap perChMaxRingLL128Bw is not applied (the Tree caps are, across nodes: :func:`tree_channel_caps`).
PROTOCOL_BW: dict[str, float] = {"ll": 0.5, "ll128": 0.92, "simple": 1.0}
#: llMaxBws across nodes, (N2, N4+) in B/s, per host CPU row (NVIDIA/nccl v2.30.7-1 73cf1122 src/graph/tuning.cc
#: tunerConstants.llMaxBws, the same file at 5067397; the same columns at v2.18.1-1, the NCCL of torch 2.1's wheels,
#: static llMaxBws). ncclTopoTuneModel: "LL: for single node, we look at GPU type; for multi-node, we look at CPU
#: type": ``index1 = nNodes == 1 ? compCapIndex : (cpuVendor AMD or MIXED) ? 1 : 0``, ``index2 = nNodes <= 2 ?
#: nNodes-1 : 2``; row 0 "Volta-N1/Intel-N2/Intel-N4" {39.0, 39.0, 20.4}, row 1 "Ampere-N1/AMD-N2/AMD-N4"
#: {87.7, 22.5, 19.0} GB/s. Ring LL: ``busBw = min(llMaxBw, busBw * .5)``; Tree LL: ``busBw = min(busBw * 1.0 /
#: 3.8, llMaxBw)``. Across nodes the cap is the host's, not the GPU's, so it holds for every NVIDIA generation
#: (:data:`NCCL_GPU_FAMILIES`; docs/model.md#nccl-ll-cap).
NCCL_LL_MAX_BW_MULTI_NODE: dict[str, tuple[float, float]] = {"intel": (39.0e9, 20.4e9), "amd": (22.5e9, 19.0e9)}
#: llMaxBws on one node, column N1 of the GPU's row, B/s (same file and commit): ``index1 = compCapIndex`` when
#: ``nNodes == 1``, compCapIndex Blackwell at compute capability >= 10.0, Hopper >= 9.0, Ampere >= 8.0, else Volta
#: (Pascal too); rows {39.0, ...} Volta, {87.7, ...} Ampere, {141.0, ...} Hopper, {2*141.0, ...} Blackwell GB/s.
#: (v2.18.1-1 had 87.7 for Hopper; the model cites v2.30.7-1.) docs/model.md#nccl-ll-cap.
NCCL_LL_MAX_BW_ONE_NODE: dict[str, float] = {"pascal": 39.0e9, "volta": 39.0e9, "ampere": 87.7e9,
                                             "hopper": 141.0e9, "blackwell": 282.0e9}
#: Host CPU classes a cluster may state (``Network.host_cpu``), as NCCL's topology classifies the host
#: (src/include/graph.h NCCL_TOPO_CPU_ARCH_X86 / POWER / ARM, NCCL_TOPO_CPU_VENDOR_INTEL / AMD / ZHAOXIN; src/graph/
#: topo.cc ncclTopoAddCpu reads the vendor only on x86): intel and amd are x86 vendors, arm and power the non-x86
#: arches (vendor unset), other any other x86 vendor (Zhaoxin). Only ``amd`` takes llMaxBws row 1; every other
#: class, and an unknown host (''), takes row 0 (:data:`LL_CAP_HOST`).
HOST_CPUS = ("intel", "amd", "arm", "power", "other")
#: llMaxBws row of a host the cluster does not name (``host_cpu`` omitted): Intel x86, NCCL's row 0, which every
#: non-AMD host takes as well; the same host as NET_OVERHEAD's 1 us default for an unnamed host.
LL_CAP_HOST = "intel"
#: Accelerator families (``Network.generation``) whose collectives NCCL runs; RCCL's (cdna*) and HCCL's tables were
#: not read, TPUs run no NCCL: the LL cap is applied on these alone.
NCCL_GPU_FAMILIES = frozenset({"pascal", "volta", "ampere", "hopper", "blackwell"})
#: Tree all-reduce bandwidth factors (tuning.cc): x0.92 for every protocol, then LL /3.8 and LL128
#: x7/9 on one node, x120/128 across nodes; x0.85 for a "pure TREE pattern" graph, which a group of one GPU a node
#: always has (:func:`tree_pattern_factor`).
TREE_AR_BW = 0.92
TREE_PURE_PATTERN = 0.85
TREE_LL_DIV = 3.8
TREE_LL128_ONE_NODE = 7.0 / 9.0
TREE_LL128_MULTI_NODE = 120.0 / 128.0
#: Tree algBw = busBw x 0.5 (per-rank traffic ~2S of a double binary tree, nccl#457).
TREE_ALGBW = 0.5
#: NCCL's per-channel caps on the Tree all-reduce bus bandwidth, B/s per graph channel, columns (N2, N4+) = 2 nodes,
#: 3 or more (NVIDIA/nccl v2.30.7-1 5067397 src/graph/tuning.cc:191-203 tunerConstants perChMaxTreeBws and
#: perChMaxTreeLL128Bws, indexed by compCapIndex and ``index2 = nNodes <= 2 ? nNodes-1 : 2``, tuning.cc:268-275;
#: applied at tuning.cc:330-335: ``busBw = min(busBw * .92, nChannels * perChMaxTreeBw)``, then LL128 ``busBw =
#: min(busBw * 120/128, nChannels * perChMaxTreeLL128Bw)``). Rows by the accelerator family NCCL keys on (Pascal
#: takes the Volta row, compCapIndex 0). :func:`tree_channel_caps`; docs/model.md#nccl-tree-caps.
NCCL_TREE_CH_MAX_BW: dict[str, tuple[float, float]] = {
    "pascal": (18.5e9, 10.0e9), "volta": (18.5e9, 10.0e9), "ampere": (23.6e9, 17.8e9),
    "hopper": (41.4e9, 36.0e9), "blackwell": (42.8e9, 24.0e9)}
NCCL_TREE_LL128_CH_MAX_BW: dict[str, tuple[float, float]] = {
    "pascal": (20.0e9, 20.0e9), "volta": (20.0e9, 20.0e9), "ampere": (20.0e9, 20.0e9),
    "hopper": (36.7e9, 29.0e9), "blackwell": (31.67e9, 20.0e9)}
#: The per-channel network speeds NCCL's topology search tries across nodes, fastest first, GB/s (src/graph/
#: search.cc:1052-1065 speedArrayInter, sm90SpeedArrayInter, sm100SpeedArrayInter; chosen at search.cc:1157-1170 by
#: the smallest compute capability: >= 10.0 sm100, >= 9.0 sm90, else the first). The search starts at the fastest
#: speed not above the GPU's NIC (system->maxBw, search.cc:1168-1171) and a NIC path carries as many channels of that
#: speed as fit in its bandwidth (followPath subtracts each channel's bw, search.cc:81-122).
NCCL_INTER_SPEEDS: dict[str, tuple[float, ...]] = {
    "legacy": (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2,
               0.24, 0.12),
    "hopper": (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12),
    "blackwell": (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
                  2.4, 1.2, 0.24, 0.12)}
#: NCCL's bandwidth of one NVLink in its topology search and the datasheet's rate of that link per direction, GB/s,
#: by the accelerator family (NVIDIA/nccl 5067397 src/graph/topo.h:19-24 SM70/SM80 20.0, SM90 20.6, SM100 40.1,
#: ncclTopoNVLinkBw topo.h:274-282; NVLink 2-4 25 GB/s a link per direction, NVLink 5 50): a GPU's NVLink tier of
#: ``B`` per direction is ``B / datasheet`` links, NCCL's ``links x nccl`` (H100: 450 / 25 = 18 x 20.6 = 370.8 GB/s,
#: the ``totalBw 370.8`` NCCL logs on an 18-link Hopper node, nccl#1189). :func:`nccl_graph_channels_inter`.
NCCL_NVLINK_LINK_BW: dict[str, tuple[float, float]] = {
    "volta": (20.0, 25.0), "ampere": (20.0, 25.0), "hopper": (20.6, 25.0), "blackwell": (40.1, 50.0)}
#: The most channels a search graph holds: MAXCHANNELS / 2 (graph->maxChannels, src/graph/search.cc), the graph's
#: channels being duplicated afterwards (src/graph/connect.cc:460).
MAX_GRAPH_CHANNELS = 32.0
#: ncclTopoDupChannels (src/graph/search.cc:1036-1048 at 5067397): after the first search pass a graph's channels are
#: doubled (their bw halved, up to :data:`MAX_GRAPH_CHANNELS`) unless its bw is under 25 GB/s, or, on compute
#: capability above 8.0 (Hopper, Blackwell), under 50 GB/s with more than 4 channels (GB/s, GB/s, channels).
DUP_MIN_SPEED, DUP_SM90_SPEED, DUP_SM90_CHANNELS = 25.0, 50.0, 4.0
#: ncclTopoPostset's second doubling across nodes on compute capability >= 90 (NVIDIA/nccl 73cf112 v2.30.7-1
#: src/graph/connect.cc:481): while the ring graph's bwIntra is above 45 GB/s and the channels are under 16
#: (GB/s, channels). :func:`nccl_execution_channels`.
SM90_EXEC_DOUBLE_BW, SM90_EXEC_DOUBLE_BELOW = 45.0, 16.0
#: treeCorrectionFactor[protocol][floor(log2(S/64))], S = 64 B .. 256 MiB (tuning.cc). NCCL uses
#: it as a step function and only for index <= 22; here it is interpolated linearly in log2 S between
#: bucket starts and is 1 from 512 MiB on, which keeps t(S) monotone (a step up in the factor would make
#: a larger message faster than a smaller one).
TREE_CORRECTION: dict[str, tuple[float, ...]] = {
    "ll": (1, 1, 1, 1, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1, 1, 1, 1),
    "ll128": (1, 1, 1, 1, 1, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1, 1),
    "simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
}
#: Ring + Simple + AllReduce across nodes: latency x1.4 once S / (nChannels x nRanks) >= 64 B (the
#: "plateau", tuning.cc; x1.9 before SM80, not applied: every built-in GPU is SM80 or newer).
RING_PLATEAU = 1.4
RING_PLATEAU_BYTES = 64.0
#: Runtime channel/thread reduction (enqueue.cc): while S < nc x nt x threshold NCCL drops
#: channels down to 1, then halves threads while nt % 128 == 0. Threads per CTA (device.h): LL 512,
#: LL128 640, Simple 512; the halving stops at 64 (512 -> 64) and at 320 for LL128 (320 % 128 != 0).
#: Thresholds in bytes per thread (comm.h): LL 8, LL128 8, Simple 64; Ring LL x nRanks.
NCCL_THREADS: dict[str, float] = {"ll": 512.0, "ll128": 640.0, "simple": 512.0}
NCCL_MIN_THREADS: dict[str, float] = {"ll": 64.0, "ll128": 320.0, "simple": 64.0}
NCCL_THREAD_THRESHOLD: dict[str, float] = {"ll": 8.0, "ll128": 8.0, "simple": 64.0}
#: Bandwidth one channel (one CTA at full threads) moves: NCCL's per-link NVLink bandwidth used by its
#: topology search, 20.0 GB/s for SM70/SM80 (20.6 SM90; topo.h); busBw = nChannels x bw per
#: channel. Modelling assumption: one channel carries about one link's worth on every tier,
#: so a group whose bottleneck busbw is B runs clip(B / CHANNEL_BW, 1, MAXCHANNELS) channels when full.
CHANNEL_BW = 20.0e9
MAX_CHANNELS = 64.0  # MAXCHANNELS (device.h)
#: Link classes that use NCCL's NVLink row / PCI row: scalemodel.choices INTRA_PROTOCOLS; every other tier uses the NET
#: row. LL128 is off on PCIe and on TCP/Ethernet paths.
NO_LL128_PROTOCOLS = frozenset({"pcie", "tcp", "ethernet"})

#: Algorithm families for ``auto``. "nccl": only what NCCL implements: all-reduce Ring and Tree,
#: plus NVLS/CollNet (modelled by ``hierarchical`` with an in-network-reduction level) where a tier the
#: group spans declares in-network reduction; AG/RS Ring, NVLS (as ``hierarchical``, one NVLS domain,
#: :func:`nvls_gather_applies`) and PAT (as ``rd``, one GPU per node, :func:`pat_applies`); broadcast/reduce
#: Ring; all-to-all and send/recv are NCCL's grouped point-to-point (``direct``). "all": every
#: applicable algorithm (one-shot ``direct`` only inside the innermost tier). "auto" = "nccl" unless a
#: tier's protocol is "ici" (TPU pods do not run NCCL), then "all".
FAMILIES: tuple[str, ...] = ("auto", "nccl", "all")
NCCL_FAMILY: dict[str, tuple[str, ...]] = {
    "allreduce": ("ring", "tree", "hierarchical"),
    "reducescatter": ("ring", "rd", "hierarchical"),
    "allgather": ("ring", "rd", "hierarchical"),
    "alltoall": ("direct",),
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "sendrecv": ("direct",),
}

# ------------------------------------------------------------------------------------------------
# Links as one (algorithm, protocol) sees them
# ------------------------------------------------------------------------------------------------

def _link_class(tier: Tier, i: int) -> str:
    """NCCL's link row for a tier: "nvlink" (NVLink/NVSwitch/xGMI/ICI/C2C, or an unlabelled innermost
    tier), "pci" (PCIe) or "net" (everything else: RDMA, TCP, Ethernet)."""
    proto = tier.protocol.lower()
    if proto in NVLINK_CLASS or (i == 0 and not proto):
        return "nvlink"
    if proto in PCI_CLASS:
        return "pci"
    return "net"



def nvls_on(tiers: Sequence[Tier]) -> bool:
    """NCCL runs NVLink SHARP (NVLS) here: the innermost tier is NVLink-class and reduces in its switches, the
    one condition the NVLS all-reduce (:func:`nccl_inr_allreduce_time`, :func:`inr_applies`), the NVLS
    reduce-scatter / all-gather (:func:`nvls_gather_applies`) and the collective library's SM share
    (``engine.job.collective_share``) key on; a run with NCCL_NVLS_ENABLE=0 states in_network_reduction false on
    that tier. False for an empty network."""
    return bool(tiers) and bool(tiers[0].in_network_reduction) and _link_class(tiers[0], 0) == "nvlink"


def _hop(latency: float, link: str, algorithm: str, proto: str) -> float:
    return _measured(latency, link, NCCL_HW_LATENCY[link][algorithm][_PI[proto]])


def _measured(latency: float, link: str, own: float) -> float:
    """NCCL's hwLatency ``own`` of some algorithm on a ``link`` row, read on a tier whose measured hop is ``latency``
    (the Ring LL hop, :func:`hop_latency`): ``latency + own - hwLat[link][ring][LL]``. At ``latency`` = NCCL's own
    Ring LL entry it is ``own`` itself (NCCL's estimate, :func:`nccl_tuner_picks_inr`)."""
    return latency + own - NCCL_HW_LATENCY[link]["ring"][0]


def hop_latency(tier: Tier, i: int, algorithm: str, proto: str) -> float:
    """Per-hop latency of ``algorithm`` ("ring" or "tree") with protocol ``proto`` on tier ``i``.

    ``Tier.latency`` is read as the measured per-hop latency of the smallest messages, which NCCL sends
    with Ring LL (nccl-tests#123: 8x A100 ring, 10 us at n = 2 to 33.7 us at n = 8, i.e. about 2 us per
    hop on top of a ~6 us base; docs/model.md#nccl). Other (algorithm, protocol) pairs add
    NCCL's own difference to that entry (hwLatencies, tuning.cc; docs/model.md#nccl):
    ``alpha = Tier.latency + hwLat[link][algorithm][proto] - hwLat[link][ring][LL]``, e.g. an NVLink hop of
    2 us costs 2 / 3.3 / 4.8 us with LL / LL128 / Simple. (Modelling assumption: NCCL's table is kept as
    per-protocol increments rather than absolute values, since its absolute LL NVLink hop, 0.6 us, is
    about a third of the measured one.)
    """
    return _hop(tier.latency, _link_class(tier, i), algorithm, proto)


def protocol_links(pl: Placement, proto: str, algorithm: str = "ring", bw_factor: float | None = None
                   ) -> Placement:
    """The placed group as one NCCL (algorithm, protocol) sees it: hop latency from :func:`hop_latency`
    (the placement's latency read as the Ring LL hop), line rate x ``bw_factor`` (default: the Ring protocol
    factor ``PROTOCOL_BW``). Same placement, other links; made once per placement and (protocol, algorithm,
    factor), so the figures its copy keeps (:attr:`Placement.memo`) serve every collective on the group."""
    key = ("protocol_links", proto, algorithm, bw_factor)
    if key in pl.memo:
        return pl.memo[key]  # type: ignore[no-any-return]
    f = PROTOCOL_BW[proto] if bw_factor is None else bw_factor
    alpha = np.array([_hop(float(a), _link_class(t, i), algorithm, proto)
                      for i, (a, t) in enumerate(zip(pl.alpha, pl.network.tiers, strict=True))])
    out = pl.relinked(alpha, pl.bandwidth * f,
                      overhead_factor=NET_OVERHEAD_SIMPLE if proto == "simple" and algorithm == "ring" else 1.0)
    pl.memo[key] = out
    return out


def net_overhead_default(host_cpu: str) -> float:
    """NCCL's default network post overhead a ring step for a host CPU class (:data:`HOST_CPUS`), s: getNetOverhead
    (tuning.cc v2.30.7-1): 1 us on x86 Intel, 2 us on x86 AMD, 1 us otherwise (arm, power, other x86 vendors);
    an unknown host ('') keeps Intel's :data:`NET_OVERHEAD` (docs/model.md#ring-net-overhead)."""
    return NET_OVERHEAD_AMD if host_cpu == "amd" else NET_OVERHEAD


def ll_cap_row(host_cpu: str) -> str:
    """The llMaxBws row (key of :data:`NCCL_LL_MAX_BW_MULTI_NODE`) of a host CPU class (:data:`HOST_CPUS`):
    ``amd`` -> ``"amd"`` (NCCL's row 1: cpuVendor AMD); intel, arm, power, other and '' (unknown) -> ``"intel"``
    (row 0: cpuVendor Intel, Zhaoxin, or none on a non-x86 host; an unknown host keeps :data:`LL_CAP_HOST`)."""
    return "amd" if host_cpu == "amd" else LL_CAP_HOST


def ll_max_busbw(pl: Placement, host: str | None = None) -> np.ndarray:
    """NCCL's cap on the LL protocol's bus bandwidth for the placed group, B/s (docs/model.md#nccl-ll-cap).

    ``llMaxBw`` of tuning.cc across nodes (:data:`NCCL_LL_MAX_BW_MULTI_NODE`): with ``N`` = the nodes the group
    spans (innermost-tier domains, ``Placement.domains(0)``), ``cap = llMaxBws[row][N2]`` at ``N = 2`` and
    ``llMaxBws[row][N4]`` at ``N >= 3``, ``row`` = :func:`ll_cap_row` of ``host`` (default: the network's
    ``host_cpu``; unknown: Intel's row); inside one node (``N = 1``) the GPU's row instead,
    :data:`NCCL_LL_MAX_BW_ONE_NODE` (Hopper 141 GB/s, Ampere 87.7); ``inf`` (no cap) on networks NCCL does not run
    (:data:`NCCL_GPU_FAMILIES`). Intel (and ARM, POWER) hosts: 39.0 GB/s on 2 nodes, 20.4 GB/s on 3 or more; AMD
    hosts: 22.5 and 19.0 GB/s."""
    nodes = pl.domains(0)
    gen = pl.network.generation.lower()
    if gen not in NCCL_GPU_FAMILIES:
        return np.full(np.shape(nodes), np.inf)
    n2, n4 = NCCL_LL_MAX_BW_MULTI_NODE[ll_cap_row(pl.network.host_cpu if host is None else host)]
    return np.where(nodes > 2.5, n4, np.where(nodes > 1.5, n2, NCCL_LL_MAX_BW_ONE_NODE[gen]))


def protocols_for(network: Network) -> tuple[str, ...]:
    """LL and Simple always; LL128 only where no tier is PCIe/TCP (protocol, or transport tcp: NCCL enables it
    only on NVLink paths and capable NICs, docs/model.md#nccl)."""
    if any(t.protocol.lower() in NO_LL128_PROTOCOLS or t.transport == "tcp" for t in network.tiers):
        return ("ll", "simple")
    return PROTOCOLS



# ------------------------------------------------------------------------------------------------
# Channels, ramp, Tree corrections
# ------------------------------------------------------------------------------------------------

def nccl_channels(bus_bw: np.ndarray | float) -> np.ndarray:
    """Channels NCCL runs at full size: ``clip(busbw / CHANNEL_BW, 1, MAX_CHANNELS)`` (busBw = nChannels x
    per-channel bw; CHANNEL_BW is a modelling assumption, see its comment)."""
    return np.clip(np.asarray(bus_bw, dtype=float) / CHANNEL_BW, 1.0, MAX_CHANNELS)


def channel_ramp_size(S: np.ndarray, proto: str, channels: np.ndarray, ranks: np.ndarray, *,
                      ring_ll: bool = False) -> np.ndarray:
    """Bytes that the bandwidth term is charged for, once NCCL's runtime channel/thread reduction is applied.

    NCCL runs ``nc`` channels of ``nt`` threads only while ``S >= nc nt threshold`` (enqueue.cc),
    first dropping channels to 1, then halving threads. Throughput is taken as proportional
    to active channels (busBw = nChannels x bw) and, within one channel, to active threads (modelling
    assumption). In the continuous limit the achieved fraction of the full bandwidth is
    ``r(S) = clip(S / S_full, r_min, 1)`` with ``S_full = nc nt threshold`` and
    ``r_min = nt_min / (nc nt)``, and a bandwidth term ``S / (B r)`` equals one at full bandwidth for

    ``S_eff = S / r(S) = min(S / r_min, max(S, S_full))``:

    below S_full a message costs as many byte-times as S_full (too few bytes per channel to fill the
    pipe), below r_min S_full it scales down linearly again. Non-decreasing in S. ``ring_ll``: the
    algorithm is a ring, so the LL threshold is multiplied by the number of ranks (NCCL's Ring LL rule).
    """
    thr = NCCL_THREAD_THRESHOLD[proto] * (np.asarray(ranks, dtype=float) if ring_ll and proto == "ll" else 1.0)
    nt = NCCL_THREADS[proto]
    s_full = channels * nt * thr
    r_min = NCCL_MIN_THREADS[proto] / (channels * nt)
    return np.minimum(S / r_min, np.maximum(S, s_full))


def tree_correction(proto: str, S: np.ndarray) -> np.ndarray:
    """NCCL's treeCorrectionFactor for Tree all-reduce bandwidth (tuning.cc), interpolated linearly
    in log2(S/64) between bucket starts (64 B .. 256 MiB), 1 from 512 MiB on; constant below 64 B."""
    table = (*TREE_CORRECTION[proto], 1.0)
    x = np.log2(np.maximum(np.asarray(S, dtype=float), 1.0) / 64.0)
    return np.interp(x, np.arange(len(table), dtype=float), np.asarray(table, dtype=float))



def inter_speed(gbs: np.ndarray, speeds: tuple[float, ...]) -> np.ndarray:
    """The per-channel speed NCCL's search runs at for NICs of ``gbs`` GB/s: the fastest of ``speeds`` (one of
    :data:`NCCL_INTER_SPEEDS`, fastest first) not above ``gbs`` (to 1e-9 relative), the slowest where none is (and
    where ``gbs`` is NaN). One binary search of the sorted list, not a comparison against each speed in turn."""
    asc = np.sort(np.asarray(speeds, dtype=float))
    at = np.searchsorted(asc, gbs * (1 + 1e-9), side="right") - 1
    return np.where(np.isnan(gbs) | (at < 0), speeds[-1], asc[np.clip(at, 0, len(asc) - 1)])


#: :func:`_inter_graph` of the small groups last priced: {what it reads: (channels, speed)}, read-only arrays.
_INTER_GRAPHS: dict[tuple[object, ...], tuple[np.ndarray, np.ndarray]] = {}
#: Groups of at most this many elements are remembered across placements (a key of their bytes is cheap beside the
#: search); larger grids are priced once per placement (:attr:`Placement.memo`) as a planner's grid is.
INTER_GRAPH_MEMO_ELEMENTS = 64


def _inter_graph(pl: Placement) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_inter_graph_of` the placed group, computed once per placement (:attr:`Placement.memo`) and, for a
    group of at most :data:`INTER_GRAPH_MEMO_ELEMENTS` elements, once per value of everything it reads (the
    accelerator generation, each tier's span, NICs and protocol, the per-tier line rates, the group's per-tier
    counts ``c``): a calibration or a sensitivity evaluates the same few groups hundreds of times, each time on a new
    placement, and the cluster factors it varies leave most of them as they were (evalspeed41). Read-only arrays,
    shared."""
    hit = pl.memo.get("inter_graph")
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    key = None
    if pl.p.size <= INTER_GRAPH_MEMO_ELEMENTS:
        key = (pl.network.generation, tuple((t.span, t.gpus_per_nic, t.protocol) for t in pl.network.tiers),
               pl.bandwidth.dtype.str, pl.bandwidth.tobytes(),
               tuple((c.dtype.str, c.shape, c.tobytes()) for c in pl.c), pl.p.shape)
        hit = _INTER_GRAPHS.get(key)
    if hit is None:
        n, bw = _inter_graph_of(pl)
        n.setflags(write=False)
        bw.setflags(write=False)
        hit = (n, bw)
        if key is not None:
            if len(_INTER_GRAPHS) >= 256:
                _INTER_GRAPHS.clear()
            _INTER_GRAPHS[key] = hit
    pl.memo["inter_graph"] = hit
    return hit


def _inter_graph_of(pl: Placement) -> tuple[np.ndarray, np.ndarray]:
    """(channels, per-channel bwIntra GB/s) of NCCL's search graph across nodes for the placed group
    (docs/model.md#nccl-tree-caps).

    A node's NICs on the outer tiers the group spans run at ``b = bandwidth x gpus_per_nic`` (the per-GPU line rate
    times the GPUs behind one NIC; the slowest such NIC where several tiers are spanned). The search runs at ``s`` =
    the fastest per-channel speed of NCCL's list not above ``b`` (:data:`NCCL_INTER_SPEEDS`, search.cc:1157-1171) and
    a NIC carries ``floor(b / s)`` channels of it (ncclTopoSearchRecNet skips a NIC whose ``net.bw`` left is under
    ``s`` and takes ``s`` off it a channel, search.cc:739-750). The group's ``c_0`` GPUs of a node reach ``n = min(c_0
    max(1, 1 / g), span_0 / g)`` NICs, ``g`` GPUs a NIC: each its own (or its ``1 / g``) where a GPU has a NIC, and
    where ``g`` GPUs share one, one NIC a GPU up to the node's ``span_0 / g`` **[assumption: the group's GPUs of a node
    sit behind different NICs, as a DP group under TP does in Megatron's rank order; a GPU's own PCIe link holds one
    channel of the speed on the built-in shared-NIC nodes, so it cannot feed a second NIC]**. Then ``nCh = min(32,
    n max(1, floor(b / s)))``, doubled as ncclTopoDupChannels does (:data:`DUP_MIN_SPEED`: unless s < 25, or on
    Hopper / Blackwell s < 50 with nCh > 4; the Tree graph takes the Ring graph's count, init.cc:1184-1185). E.g. 8
    GPUs with a 400 Gb/s NIC each on Hopper: s = 48 GB/s, one channel a NIC, 8 channels, not doubled; 1 GPU a node (a
    DP group under TP 8): 1 doubled to 2 (aws-ofi-nccl presents a p5 GPU's 4 EFA rails as one 400 Gb/s device:
    aws/aws-ofi-nccl 2daf7d30 src/nccl_ofi_rdma.cpp:410-413 ``props->port_speed *= max_group_size``); 8 A100 on 4
    HDR NICs of 25 GB/s (2 GPUs a NIC): s = 24, 4 NICs x 1 = 4 channels, not doubled (24 < 25). ``nan`` where the
    group spans no outer tier.

    The channels also pass through the node's NVLink: a ring channel enters one of the group's ``c_0`` GPUs of a node
    from its NIC and chains through the others to the NIC it leaves by, so every GPU but the chain's last sends it
    over its NVLink to the switch, and the search takes the channel's speed off each link it follows (followPath,
    search.cc:81-122, ``bwIntra = bwInter = s`` in a search across nodes, search.cc:1174). A GPU whose NVLink NCCL
    counts as ``L`` (:data:`NCCL_NVLINK_LINK_BW`) sends at most ``floor(L / s)`` channels, the node's GPUs together
    ``c_0 floor(L / s)`` sends of the ``c_0 - 1`` a channel: ``nCh <= floor(c_0 floor(L / s) / (c_0 - 1))`` before
    the doubling (an NVLink-class innermost tier of an NCCL accelerator and c_0 >= 2), and the search walks its speeds
    down while that gives more bandwidth (:func:`_nvlink_search_walk`). 8 H100 with a 400 Gb/s NIC each: L = 370.8,
    floor(370.8 / 48) = 7, at most 8 channels, the 8 the NICs give (8 x 48 >= 370.8 ends the walk); with 800 Gb/s
    NICs the NICs would take 16, the NVLink holds 8 (16 would need 14 sends of 48 GB/s from each GPU, 672 GB/s)."""
    gen = pl.network.generation.lower()
    speeds = NCCL_INTER_SPEEDS["blackwell" if gen == "blackwell" else "hopper" if gen == "hopper" else "legacy"]
    b = np.full(pl.p.shape, np.inf)
    g = np.ones(pl.p.shape)
    for i in range(1, pl.ntiers):
        gpn = float(pl.network.tiers[i].gpus_per_nic)
        nic = float(pl.bandwidth[i]) * gpn
        take = (pl.level(i) > 1 + 1e-9) & (nic < b)
        b, g = np.where(take, nic, b), np.where(take, gpn, g)
    gbs = b / 1e9
    s = inter_speed(gbs, speeds)
    with np.errstate(invalid="ignore"):
        per_nic = np.maximum(1.0, np.floor(gbs / s + 1e-9))
    nics = np.minimum(pl.c[0] * np.maximum(1.0, 1.0 / g), float(pl.spans[0]) / g)
    n = np.minimum(MAX_GRAPH_CHANNELS, np.floor(nics + 1e-9) * per_nic)
    link = NCCL_NVLINK_LINK_BW.get(gen)
    if link is not None and _link_class(pl.network.tiers[0], 0) == "nvlink":
        n, s = _nvlink_search_walk(gbs, np.floor(nics + 1e-9), np.asarray(pl.c[0], dtype=float),
                                   float(pl.bandwidth[0]) / (link[1] * 1e9) * link[0], speeds, n, s)
    # ncclTopoDupChannels (search.cc:1036-1048): doubled unless bw < 25 GB/s, or, above compute capability 8.0,
    # unless bw < 50 GB/s with more than 4 channels; the Tree graph takes the Ring graph's count (init.cc:1184-1185)
    keep = (s < DUP_MIN_SPEED) | ((gen in ("hopper", "blackwell")) & (s < DUP_SM90_SPEED) & (n > DUP_SM90_CHANNELS))
    dup = np.minimum(MAX_GRAPH_CHANNELS, 2.0 * n)
    with np.errstate(divide="ignore", invalid="ignore"):
        bw = np.where(keep, s, s / np.ceil(dup / np.maximum(n, 1.0)))  # bwIntra /= DIVUP(dup, nCh), search.cc:1046
    n = np.where(keep, n, dup)
    return np.where(np.isfinite(b), n, np.nan), bw


def nccl_graph_channels_inter(pl: Placement) -> np.ndarray:
    """Channels of NCCL's search graph across nodes for the placed group (:func:`_inter_graph`)."""
    return _inter_graph(pl)[0]


def nccl_execution_channels(pl: Placement, nvls_channels: float = 0.0) -> np.ndarray:
    """The channels (one CTA, one SM each) NCCL runs a ring / tree / p2p collective on for a group that spans nodes
    (docs/model.md#contention); ``nan`` where the group stays in one node (there the accelerator's
    ``collective_units``: the intra-node search's doubled count) or the family is not NCCL's. Derived, not yet
    charged by the contention: the count grows with the NIC, so charged alone it would make more bandwidth slower
    (docs/model.md#contention, chan27); nor does the bandwidth half mend it: NCCL's bandwidth model reads the search
    graph (``busBw = graphs[a]->nChannels * bw``, v2.30.7-1 src/graph/tuning.cc:324), not this count, and the CTAs a
    byte takes jump at ncclTopoDupChannels' 25 GB/s threshold (dgx-a100 at 31.25 GB/s NICs: 32 CTAs, chan32). The
    published evidence (hardware/measurements/contention.yaml, chan35) shows a resident CTA holds its SM busy or
    waiting, but times compute at no two nonzero CTA counts, so it does not settle the charge either.

    ncclTopoPostset duplicates the search graph's channels, ``c = min(MAXCHANNELS, 2 nCh)`` with ``nCh`` the graph's
    channels after ncclTopoDupChannels (:func:`nccl_graph_channels_inter`): NVIDIA/nccl 73cf112 v2.30.7-1
    src/graph/connect.cc:460 (v2.18.3-1 :391, v2.21.5-1 :443, v2.27.7-1 :452). Then, across nodes on compute
    capability >= 90 (``== 90`` before v2.25), where the ring graph's ``bwIntra`` (the search speed, halved where
    ncclTopoDupChannels doubled the graph, search.cc:1046-1047) is above 45 GB/s and ``c < 16``, it doubles again
    ("4 compute channels per search channel to reach peak BW on <8 PPN"; v2.30.7-1 :481, v2.21.5-1 :457, v2.27.7-1
    :466; v2.18.3-1 :405 has ``2 nCh <= MAXCHANNELS`` for ``c < 16``, not modelled). Where NCCL builds NVLS channels
    the ring count is raised to theirs (``if (comm->nChannels < comm->nvlsChannels) copyChannels``, v2.20.3-1 :473,
    v2.21.5-1 :478, v2.27.7-1 :493; gone by v2.28): ``nvls_channels`` (0 with NVLS off), where the group has more
    than 2 GPUs a node (ncclNvlsInit builds none on ``gpuCount <= 2``, v2.27.7-1 src/transport/nvls.cc:160). Not
    modelled: the UNPACK-network doubling below 16 (TCPX, v2.27.7-1 :472) and a run's NCCL_MIN/MAX_CTAS or
    per-communicator min / max CTAs (``max(min(c, maxCTAs), minCTAs)``, connect.cc:483-484; read, not priced:
    docs/model.md#contention, ctacap35, tests/test_ctacap35.py).

    8 H100 a node with a 400 Gb/s NIC each: 8 graph channels at 48 GB/s (not duplicated: 48 < 50 with 8 > 4) -> 16,
    the "16 coll channels" of a multi-node H100 log (deepseek-ai/DeepEP#106; "execution channels are typically 2x the
    search channels", NVIDIA/nccl#1041); one H100 a node: 1 -> 2 (ncclTopoDupChannels, bwIntra 24) -> 4, not doubled
    again (24 <= 45)."""
    n, bw = _inter_graph(pl)
    c = np.minimum(MAX_CHANNELS, 2.0 * n)
    sm90 = pl.network.generation.lower() in ("hopper", "blackwell")
    c = np.where(sm90 & (bw > SM90_EXEC_DOUBLE_BW) & (c < SM90_EXEC_DOUBLE_BELOW), 2.0 * c, c)
    c = np.where(pl.c[0] > 2.5, np.maximum(c, nvls_channels), c)  # NVLS needs > 2 GPUs a node (nvls.cc ncclNvlsInit)
    fam = pl.network.generation.lower() in NCCL_GPU_FAMILIES
    return np.where(np.isfinite(n) & fam & (pl.domains(0) > 1.5), c, np.nan)


def _nvlink_search_walk(gbs: np.ndarray, nics: np.ndarray, c0: np.ndarray, total: float, speeds: tuple[float, ...],
                        n0: np.ndarray, s0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(channels, speed) of NCCL's search across nodes on an NVLink node (:func:`nccl_graph_channels_inter`; NVIDIA/nccl
    5067397 src/graph/search.cc:1164-1252): from the fastest speed not above the NIC (``gbs`` GB/s), each speed ``v``
    gives ``min(32, nics floor(gbs / v), floor(c0 floor(total / v) / (c0 - 1)))`` channels (the NICs' and, with c0 >= 2
    GPUs of the node in the group, the NVLink's: ``total`` GB/s, NCCL's NVLink of one GPU, is also the search's
    ``totalBw``, search.cc:30-37); the graph with the most ``channels x v`` is kept (a tie keeps the faster,
    ncclTopoCompareGraphs), the walk stops once ``channels x v >= totalBw`` (search.cc:1198) and moves to the next
    speed only while it is above 0.49 of the kept graph's (search.cc:1243). ``n0`` / ``s0``: where the NIC is not
    finite (no outer tier). Every step is elementwise, so the walk runs only the speeds some finite NIC reaches and
    stops once no finite element is still walking: the elements it leaves out keep ``n0`` / ``s0`` either way."""
    best_n, best_s = np.zeros(gbs.shape), np.array(s0, dtype=float)
    active = np.isfinite(gbs)
    reach = gbs[active] * (1 + 1e-9)
    top = float(reach.max()) if reach.size else -np.inf
    started = np.zeros(gbs.shape, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        for v in speeds:
            if not v <= top:  # no finite element reaches v: the step would change nothing
                continue
            here = v <= gbs * (1 + 1e-9)
            active = active & (~(started & here) | (best_n == 0) | (v / best_s > 0.49))
            run = here & active
            held = np.where(c0 > 1.5, np.floor(c0 * np.floor(total / v + 1e-9) / np.maximum(c0 - 1.0, 1.0) + 1e-9),
                            np.inf)
            ch = np.minimum(np.minimum(MAX_GRAPH_CHANNELS, nics * np.floor(gbs / v + 1e-9)), held)
            better = run & (ch * v > best_n * best_s * (1 + 1e-12))
            best_n, best_s = np.where(better, ch, best_n), np.where(better, v, best_s)
            started = started | here
            active = active & ~(run & (best_n * best_s >= total * (1 - 1e-12)))
            if not active.any():
                break
    ok = np.isfinite(gbs) & (best_n > 0)
    return np.where(ok, best_n, n0), np.where(ok, best_s, s0)


def tree_pattern_factor(pl: Placement) -> np.ndarray:
    """NCCL's x0.85 on the Tree all-reduce bus bandwidth of a "pure TREE pattern" graph (NVIDIA/nccl 5067397
    src/graph/tuning.cc:336 ``if (a == NCCL_ALGO_TREE && comm->maxTreePattern == NCCL_TOPO_PATTERN_TREE) busBw *=
    .85``, after the caps; since v2.18.3-1, the rank's own graph before v2.26.2-1). The Tree graph is searched as
    BALANCED_TREE (src/init.cc:1183) and ncclTopoCompute makes it TREE wherever the communicator has one GPU on the node
    (search.cc:1133 ``if (ngpus == 1 && graph->pattern != NCCL_TOPO_PATTERN_RING) graph->pattern =
    NCCL_TOPO_PATTERN_TREE``); ``maxTreePattern`` is the largest over the ranks (init.cc:1447), and TREE (3) is the
    largest a Tree graph takes. So :data:`TREE_PURE_PATTERN` where the group has one GPU a node across 2 or more nodes
    (``c_0 = 1``) on the families NCCL runs, else 1. Hopper and Blackwell may also fall back to TREE from a larger
    node ("Try a simpler tree", search.cc:1215-1219) when the search finds it better; that depends on the search and
    is not applied."""
    one = (pl.c[0] < 1.5) & (pl.domains(0) > 1.5) & (pl.network.generation.lower() in NCCL_GPU_FAMILIES)
    return np.where(one, TREE_PURE_PATTERN, 1.0)


def tree_channel_caps(pl: Placement) -> tuple[np.ndarray, np.ndarray]:
    """NCCL's caps on the Tree all-reduce bus bandwidth of the placed group, B/s: ``(nCh perChMaxTreeBw, nCh
    perChMaxTreeLL128Bw)`` with ``nCh`` = :func:`nccl_graph_channels_inter` and the columns N2 (2 nodes) / N4 (3 or
    more) of :data:`NCCL_TREE_CH_MAX_BW` and :data:`NCCL_TREE_LL128_CH_MAX_BW` (tuning.cc:330-335). ``inf`` (no cap)
    on one node (the graph's channels there are NVLink's, not counted here), and on accelerators NCCL does not run
    (:data:`NCCL_GPU_FAMILIES`). docs/model.md#nccl-tree-caps."""
    nodes = pl.domains(0)
    gen = pl.network.generation.lower()
    inf = np.full(np.shape(nodes), np.inf)
    if gen not in NCCL_GPU_FAMILIES or pl.ntiers < 2:
        return inf, inf
    nch = nccl_graph_channels_inter(pl)
    multi = (nodes > 1.5) & np.isfinite(nch)
    col = np.where(nodes > 2.5, 1, 0)
    t2, t4 = NCCL_TREE_CH_MAX_BW[gen]
    l2, l4 = NCCL_TREE_LL128_CH_MAX_BW[gen]
    cap_t = np.where(multi, nch * np.where(col == 1, t4, t2), np.inf)
    cap_l = np.where(multi, nch * np.where(col == 1, l4, l2), np.inf)
    return cap_t, cap_l


def nccl_chain_hops(pl: Placement, estimate: bool = False) -> np.ndarray:
    """Intra-node hops of the chain NCCL's Tree and CollNetChain run inside a node, each way
    (docs/model.md#nccl-tree-uneven). NCCL builds each node's chain over that node's own ranks (NVIDIA/nccl
    v2.30.7-1 src/graph/connect.cc ``ncclTopoPreset``: ``tree.up = treeIntra[i - 1]``, ``tree.down[0] =
    treeIntra[i + 1]`` for ``i < localRanks``; init.cc L1384-1400 keeps each node's own ``localRanks``) and joins whole
    nodes by index whatever their fill (trees.cc ``ncclGetDtree(nNodes, node)``), so the critical path runs through
    the fullest node's chain, ``c_0 - 1`` hops (the group's first nodes are full, :mod:`placement`): the time.
    ``estimate``: NCCL's own tuning formula, ``nRanks / nNodes - 1`` in C integer division over ``nNodes =
    ceil(p / c_0)`` nodes (tuning.cc L416 Tree, L423 CollNetChain; connect.cc L144 the tree depth, "Not an exact
    value but a good approximation in most cases"): the mean fill rounded down, which decides what NCCL's tuner
    picks (:func:`nccl_tuner_picks_inr`). Both are ``c_0 - 1`` on whole nodes; 20 ranks on nodes of 8 (8, 8, 4) are
    7 hops on the critical path and 5 in NCCL's estimate, 3 ranks on nodes of 2 (2, 1) 1 and 0."""
    if not estimate:
        return np.asarray(pl.c[0] - 1.0)
    return np.maximum(np.floor(pl.p / pl.domains(0) + 1e-9) - 1.0, 0.0)


def _tree_hops(pl: Placement, estimate: bool) -> np.ndarray:
    """The hop latency of :func:`nccl_tree_allreduce_time` one way, ``(ppn - 1) alpha_0 + sum_(i>=1) d_i alpha_i``,
    computed once per placement (on its links: ``pl`` is the Tree-row copy, :func:`protocol_links`) and ``estimate``
    (:attr:`Placement.memo`; read-only, shared; evalspeed41)."""
    key = ("tree_hops", estimate)
    hit = pl.memo.get(key)
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    hops = nccl_chain_hops(pl, estimate) * pl.alpha[0]
    for i in range(1, pl.ntiers):
        # NCCL's log2i(nNodes) on whole nodes: 28 ranks on nodes of 8 are nNodes 4, two levels, not floor(lg 3.5) = 1
        hops = hops + algorithms.tree_depth(pl, i, pl.c[0]) * pl.alpha[i]
    hops = np.asarray(hops)
    hops.setflags(write=False)
    pl.memo[key] = hops
    return hops


def nccl_tree_allreduce_time(S: np.ndarray, pl: Placement, proto: str, bus_bw: np.ndarray,
                             channels: np.ndarray, gamma: float = 0.0,
                             caps: tuple[np.ndarray, np.ndarray] | None = None, *,
                             estimate: bool = False) -> np.ndarray:
    """NCCL's Tree all-reduce for one protocol (tuning.cc; docs/model.md#nccl).

    Latency: ``base_tree[p] + 2 ((ppn - 1) alpha_0 + sum_(i>=1) d_i alpha_i)``: a chain inside the node
    (ppn - 1 = :func:`nccl_chain_hops`: the fullest node's c_0 - 1, or with ``estimate`` NCCL's tuning formula
    ``nRanks / nNodes - 1``, the same on whole nodes) and a double binary tree over the group's nodes whose
    ``floor(lg nNodes)`` levels (NCCL: log2i(nNodes) x interLat, tuning.cc L416 at v2.30.7-1) are apportioned to the
    outer tiers they cross, ``d_i`` of :func:`scalemodel.cost.algorithms.tree_depth` on whole node counts (at least 1
    on a spanned tier); alpha from :func:`hop_latency` with
    the Tree row (``pl`` is placed on that network).
    Bandwidth: ``algbw = 0.5 x busBw_p x corr_p(S)`` with NCCL's refinements (tuning.cc:330-335) of busbw, the
    bottleneck of :meth:`Placement.bottleneck` with the tree's flow count (``TREE_FLOWS``, docs/model.md#flow-taper)
    (NCCL's bwInter rule for N > 2; its N <= 2 use of bwIntra, is not applied): ``b = min(0.92 busbw, C_tree)``,
    then ``busBw_LL = b / 3.8`` (capped at NCCL's llMaxBw, :func:`ll_max_busbw`: ``S / (0.5 llMaxBw corr)`` at
    least), ``busBw_LL128 = min(f b, C_LL128)`` with f = 7/9 on one node else 120/128, ``busBw_Simple = b``; the
    per-channel caps ``C`` of :func:`tree_channel_caps` (inf on one node); each then x0.85 for a group of one GPU a
    node (:func:`tree_pattern_factor`); corr from :func:`tree_correction`.
    ``T = lat + S_eff / algbw + S gamma`` with S_eff from :func:`channel_ramp_size`. ``caps``: the group's
    :func:`tree_channel_caps` where already priced (they read the group and its line rates, which every protocol's
    links share: :func:`algorithm_time` prices them once for the three).
    """
    lat = NCCL_BASE_LATENCY["tree"][_PI[proto]] + 2.0 * _tree_hops(pl, estimate)
    nodes = pl.domains(0)
    cap_tree, cap_ll128 = tree_channel_caps(pl) if caps is None else caps
    bus = np.minimum(TREE_AR_BW * bus_bw, cap_tree)  # busBw = min(busBw * .92, nChannels * perChMaxTreeBw)
    if proto == "ll":
        bus = bus / TREE_LL_DIV
    elif proto == "ll128":
        bus = np.minimum(bus * np.where(nodes > 1.5, TREE_LL128_MULTI_NODE, TREE_LL128_ONE_NODE), cap_ll128)
    pure = tree_pattern_factor(pl)  # busBw *= .85 for a pure TREE pattern (one GPU a node), after the caps
    corr = tree_correction(proto, S)
    alg = TREE_ALGBW * bus * pure * corr
    # the channels the ramp counts run the bandwidth the caps leave (busBw = nChannels x per-channel bw): where the
    # per-channel cap binds, as many fewer channels; channels from the uncapped bottleneck charged a faster intra-node
    # tier more ramp bytes at the same capped rate (a step slower with more bandwidth, tests/test_review15c.py)
    uncapped = TREE_AR_BW * np.asarray(bus_bw, dtype=float)
    channels = channels * np.minimum(1.0, np.asarray(cap_tree, dtype=float) / np.maximum(uncapped, 1e-300))
    S_eff = channel_ramp_size(S, proto, channels, pl.p)
    t_bw = S_eff / alg
    if proto == "ll":  # busBw = min(busBw / 3.8, llMaxBw) on the whole message (ll_max_busbw: GPU row on one node)
        t_bw = np.maximum(t_bw, S / (TREE_ALGBW * ll_max_busbw(pl) * pure * corr))
    return np.where(pl.p > 1, lat + t_bw + S * gamma, 0.0)


# ------------------------------------------------------------------------------------------------
# In-network reduction: NVLS, NVLSTree, CollNet (SHARP) all-reduce (docs/model.md#in-network-reduction)
# ------------------------------------------------------------------------------------------------

#: nvlsEfficiency per GPU generation (tuning.cc): Hopper 0.85, Blackwell 0.74.
NVLS_EFFICIENCY: dict[str, float] = {"hopper": 0.85, "blackwell": 0.74}
#: Measured / NCCL-formula ratio of the NVLS intra-domain bus bandwidth (busBw_intra below), per generation.
#: Hopper 1.0: NCCL's own formula is within 2 % of the Azure 8x H100 / 8x H200 sweeps at 1-8 GiB and of the
#: H800 peak. Blackwell 0.854: FITTED on ONE point, the CoreWeave one-rack GB200 NVL72 sweep at 8 GiB
#: (834.57 GB/s busbw out-of-place, NCCL 2.26.2; hardware/measurements/nccl.yaml cw_gb200_nvl72_allreduce_1rack):
#: (t_model(8 GiB) - 25 us) / (t_measured - 25 us) = (17345.7 - 25) / (20299.4 - 25) = 0.854 with
#: nvlsEfficiency 0.74. Held out: the 2-rack and 20-rack CoreWeave sweeps (NVLSTree).
#: docs/model.md#in-network-reduction.
NVLS_CALIBRATION: dict[str, float] = {"hopper": 1.0, "blackwell": 0.854}
#: NVLS and NVLSTree run Simple only; their baseLatencies are 0 and their whole latency is the hwLatencies
#: entry (tuning.cc): NVLink NVLS / NVLSTree 25 us; NET NVLS 18 us, NVLSTree 20.9 us (per tree level,
#: x2 log2i(nNodes)); CollNetChain NVLink 2.8 us (per chain hop, x2 (ppn - 1)) + NET 30 us (at ppn 1 the NET
#: Tree Simple 14 us: "With ppn=1 latencies are fully exposed, use the Tree network latency").
NVLS_LATENCY = 25.0e-6
NVLS_NET_LATENCY = 18.0e-6
NVLSTREE_NET_LATENCY = 20.9e-6
COLLNET_CHAIN_NVLINK_LATENCY = 2.8e-6
COLLNET_CHAIN_NET_LATENCY = 30.0e-6
#: NCCL_MAX_NVLS_ARITY (device.h): NVLS graph channels (one head GPU each) = min(32, GPUs in the domain).
NVLS_MAX_ARITY = 32.0
#: perChMaxNVLSTreeBws[generation][N1, N2, N4+] in B/s (tuning.cc): the per-channel cap of NVLSTree.
NVLSTREE_MAX_BW: dict[str, tuple[float, float, float]] = {
    "hopper": (0.0, 57.7e9, 45.5e9), "blackwell": (0.0, 96.0e9, 80.0e9)}
#: nvlsChannels (CTAs) per generation (transport/nvls.cc): SM90 16; SM100 24 on one (multi-node NVLink)
#: domain, 32 across domains.
NVLS_CTAS: dict[str, tuple[float, float]] = {"hopper": (16.0, 16.0), "blackwell": (24.0, 32.0)}
#: NVLS_CHUNKSIZE default 128 KiB (transport/nvls.cc); enqueue.cc shrinks it for small messages (see
#: :func:`nvls_chunk_size`).
NVLS_CHUNK = 128.0 * 1024.0
#: Pipeline stages of the NVLS all-reduce kernel (device/all_reduce.h: scatter, reduce through the switch,
#: gather warp groups): a chunk pipeline of k stages costs k - 1 extra chunk steps to fill.
NVLS_PIPELINE_FILL_STEPS = 2.0
#: NVLink 4 (Hopper) carries at most 450 GB/s per GPU per direction; a faster NVLink tier is NVLink 5
#: (Blackwell). NVLS exists only on NVSwitch gen 3 (Hopper) and later.
NVLINK4_MAX_BW = 450.0e9


def nvls_generation(tier: Tier, generation: str = "") -> str:
    """GPU generation whose NCCL NVLS constants apply to an NVLink tier: the network's accelerator
    generation when it is Hopper or Blackwell (what NCCL keys its tables on, the compute capability);
    otherwise, for a hand-built network, "blackwell" when the tier's line rate exceeds NVLink 4's 450 GB/s
    per direction (NVLink 5: 900 GB/s), else "hopper" (NVLS needs NVSwitch gen 3, i.e. Hopper or later).
    Knowing the generation keeps a what-if on the bandwidth from switching NCCL's tables."""
    if generation in NVLS_EFFICIENCY:
        return generation
    return "blackwell" if tier.bandwidth > NVLINK4_MAX_BW * (1 + 1e-9) else "hopper"


def nvls_chunk_size(S: np.ndarray, concurrent_ops: np.ndarray) -> np.ndarray:
    """NVLS all-reduce chunk (enqueue.cc, NCCL_ALGO_NVLS): 128 KiB, 64 KiB if S < 64 ops C, 32 KiB if
    S < 8 ops C, 16 KiB if S < 2 ops C (each rule on the chunk left by the previous one), with
    ops = nvlsChannels x nHeads."""
    c = np.full(np.broadcast(S, concurrent_ops).shape, NVLS_CHUNK)
    for mult, floor, new in ((64.0, 65536.0, 65536.0), (8.0, 32768.0, 32768.0), (2.0, 16384.0, 16384.0)):
        c = np.where((S < mult * concurrent_ops * c) & (c > floor), new, c)
    return c


def _log2i(x: np.ndarray) -> np.ndarray:
    return log2_floor(np.maximum(x, 1.0))


def nccl_inr_allreduce_time(S: np.ndarray, pl: Placement, gamma: float = 0.0, *, estimate: bool = False) -> np.ndarray:
    """NCCL's in-network-reduction all-reduce on a placed group: the fastest of the NVLS, NVLSTree and
    CollNetChain algorithms that apply (inf where none does). tuning.cc, v2.30.7; docs/model.md#in-network-reduction.

    With ``n_0 = c_0`` ranks per NVLink domain, ``N = p / c_0`` domains, ``B_0`` the per-GPU NVLink rate
    (line x efficiency), ``B_net`` the slowest per-GPU rate of the outer tiers the group spans, ``g`` the
    generation (:func:`nvls_generation`), ``k = min(32, n_0)`` NVLS heads (graph channels):

    - NVLS graph: each channel pulls ``bw`` from every GPU, twice from its head, so ``(k + 1) bw <= B_0``
      and ``k bw = B_0 k / (k + 1)`` (search.cc ncclTopoSearchTryNvls; continuous limit of NCCL's speed
      table, modelling assumption). ``busBw_intra = 2 eff_g k bw (k - 1)/k`` ("AllReduce pipelines two
      operations" x2, ``nvlsEfficiency``), times ``NVLS_CALIBRATION[g]`` (1 on Hopper; 0.854 on Blackwell,
      fitted on one measured point, see its comment).
    - NVLS (tier 0 reduces in the switch; N = 1, or N > 1 with SHARP on an outer tier): latency ``L_0(25 us)``
      (+ ``L_net(18 us)`` when N > 1); ``busBw = min(busBw_intra, k B_net)``.
    - NVLSTree (tier 0 reduces, N > 1): latency ``L_0(25 us) + 2 log2i(N) L_net(20.9 us)``;
      ``busBw = min(busBw_intra, 2(p-1)/p k B_net / v_N, k perChMaxNVLSTreeBw[g][N])``, where ``v_N S / k``
      is what the busiest head sends (and receives) through its NIC per direction in the double binary tree
      across the domains (ncclGetDtree; connect.cc gives NVLS channel c tree c % 2, so each tree carries S/2):
      an interior domain of one tree sends S/(2k) to its parent and to each of its children, and is a leaf
      (S/(2k) up) of the other. ``v_2 = 1`` (the two trees mirror each other: root of one, leaf of the other),
      ``v_3 = 1.5`` (both trees are chains), ``v_N = 2`` from 4 domains (a domain with 2 children in one tree).
      NCCL's estimate rounds ``2(p-1)/p / v_N`` up to 2 for N <= 2 and 1 above (tuning.cc "Handle 2 node
      case of NVLSTree"; ``estimate=True`` keeps NCCL's factors). The heads are
      GPUs of the group, one NIC each (search.cc ncclTopoSearchRecNet refuses a second NIC for a head, and
      the NVLS graph has at most as many channels as the group's GPUs in the domain), so a group with fewer
      GPUs per node than the node has NICs uses only its own GPUs' NICs.
    - CollNetChain (an outer spanned tier reduces, SHARP; N > 1): latency ``2 h L_0(2.8 us) + L_net(30 us)``,
      h = :func:`nccl_chain_hops` (the fullest node's n_0 - 1; NCCL's nRanks / nNodes - 1 in the estimate),
      ``L_net(14 us)`` at n_0 = 1 (tuning.cc: "With ppn=1 latencies are fully exposed, use the Tree network latency",
      interLat = hwLat[NET][TREE][Simple]; review34);
      ``algBw = 0.5 busBw`` with NCCL's ``busBw = bwIntra`` = B_0 (chain inside the node), and not above
      the node's NICs ``n_0 B_net`` (each node sends and receives S once through the switch; modelling
      assumption, NCCL's formula has no NIC term).

    Latency: NCCL's hwLatencies (NVLink NVLS / NVLSTree 25, CollNetChain 2.8 us; NET NVLS 18, NVLSTree 20.9,
    CollNetChain 30 us) read on the measured hops as :func:`hop_latency` reads every hwLatency (coll34):
    ``L_0(h) = Tier_0.latency + h - hwLat[link_0][ring][LL]`` and ``L_net(h) = max_i (Tier_i.latency -
    hwLat[link_i][ring][LL]) + h`` over the outer tiers the group spans (NCCL's one interLat: the slowest hop the
    tree or chain crosses). So every tier the group spans charges its own latency, as Ring and Tree do (a 1 s hop
    cannot cost nothing; fuzz33), and at NCCL's own Ring LL hops it is NCCL's figure exactly. ``estimate=True``
    charges NCCL's hwLatencies as they are.

    NVLS/NVLSTree time: ``lat + (S + f min(S, ops C)) 2(p-1)/p / busBw + (p-1)/p S gamma`` (algBw =
    busBw p / (2(p-1)), tuning.cc "ratio = nRanks/nsteps"), with the pipeline fill ``f = 2`` chunk steps
    (``NVLS_PIPELINE_FILL_STEPS``) of ``ops C`` bytes, ``ops = nvlsChannels x k``, ``C`` from
    :func:`nvls_chunk_size`. NCCL's own time estimate has no fill term and the two-domain factor 2
    (``estimate=True`` gives that estimate, which :func:`nccl_tuner_picks_inr` uses); the fill comes from the
    kernel's three warp groups (device/all_reduce.h).
    """
    S = np.asarray(S, dtype=float)
    p = pl.p
    shape = np.broadcast(S, p).shape
    best = np.full(shape, np.inf)
    tiers = pl.network.tiers
    n0 = pl.c[0]
    N = p / n0
    spans_outer = [i for i in range(1, pl.ntiers)]
    b_net = np.full(p.shape, np.inf)
    sharp_outer = np.zeros(p.shape, dtype=bool)
    # the measured hops (docstring "Latency"): tier 0's, and the slowest spanned outer tier's, each less the Ring LL
    # hwLatency of its link row; 0 where no outer tier is spanned (one domain: the NET terms do not apply) and in
    # NCCL's own estimate, which charges its hwLatencies as they are
    intra_lat = 0.0 if estimate else _measured(float(pl.alpha[0]), _link_class(tiers[0], 0), 0.0)
    net_lat = np.full(p.shape, -np.inf)
    for i in spans_outer:
        spanned = pl.level(i) > 1 + 1e-9
        b_net = np.where(spanned, np.minimum(b_net, pl.bw[i]), b_net)
        net_lat = np.where(spanned, np.maximum(net_lat, _measured(float(pl.alpha[i]), _link_class(tiers[i], i), 0.0)),
                           net_lat)
        if pl.inr[i]:
            sharp_outer = sharp_outer | spanned
    net_lat = np.where(np.isfinite(net_lat) & (not estimate), net_lat, 0.0)
    multi = N > 1 + 1e-9
    red = (p - 1) / np.maximum(p, 1.0) * S * gamma
    bus_factor = 2.0 * (p - 1) / np.maximum(p, 1.0)
    if nvls_on(tiers):
        gen = nvls_generation(tiers[0], pl.network.generation)
        eff = NVLS_EFFICIENCY[gen]
        k = np.minimum(NVLS_MAX_ARITY, n0)
        graph_bw = pl.bw[0] * k / (k + 1.0)
        intra = 2.0 * eff * graph_bw * (k - 1.0) / np.maximum(k, 1.0) * NVLS_CALIBRATION[gen]
        ctas = np.where(multi, NVLS_CTAS[gen][1], NVLS_CTAS[gen][0])
        ops = ctas * k
        extra = 0.0 * S if estimate else NVLS_PIPELINE_FILL_STEPS * np.minimum(S, ops * nvls_chunk_size(S, ops))
        ok = k > 1.5  # NVLS needs at least 2 channels (tuning.cc)
        # NVLS: one domain, or several joined by SHARP (NCCL enables multi-node NVLS only with CollNet)
        nvls_ok = ok & (~multi | sharp_outer)
        bus = np.where(multi, np.minimum(intra, k * b_net), intra)
        lat = NVLS_LATENCY + intra_lat + np.where(multi, NVLS_NET_LATENCY + net_lat, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):  # bus = 0 only where NVLS does not apply (masked)
            t = lat + (S + extra) * bus_factor / bus + red
        best = np.where(nvls_ok, np.minimum(best, t), best)
        # NVLSTree: several domains
        idx = np.where(N <= 2 + 1e-9, 1, 2)
        cap = k * np.asarray(NVLSTREE_MAX_BW[gen])[idx]
        if estimate:  # NCCL's own factors
            tree_net = np.where(N <= 2 + 1e-9, 2.0, 1.0)
        else:  # v_N S / k through the busiest head's NIC (docstring)
            tree_net = bus_factor / np.where(N <= 2 + 1e-9, 1.0, np.where(N <= 3 + 1e-9, 1.5, 2.0))
        # b_net is inf where no outer tier is spanned (one domain: NVLSTree does not apply, masked below)
        net_t = np.where(multi, k * np.where(multi, b_net, 0.0) * tree_net, np.inf)
        bus_t = np.minimum(np.minimum(intra, net_t), cap)
        # the trees join whole domains: a group filling one domain and part of another (N = 13 / 8) has 2, so one
        # level up and down, not log2i(1.6) = 0 (CI's test_coll34 draw, session 35)
        lat_t = NVLS_LATENCY + intra_lat + 2.0 * _log2i(np.ceil(N - 1e-9)) * (NVLSTREE_NET_LATENCY + net_lat)
        with np.errstate(divide="ignore", invalid="ignore"):  # bus_t = 0 only where NVLSTree does not apply
            t_t = lat_t + (S + extra) * bus_factor / bus_t + red
        best = np.where(ok & multi, np.minimum(best, t_t), best)
    # CollNetChain: SHARP on an outer tier the group spans
    chain_bw = np.minimum(0.5 * pl.bw[0], n0 * b_net)
    # at one GPU a domain (ppn 1) NCCL's interLat is the NET Tree entry, not CollNetChain's ("With ppn=1 latencies are
    # fully exposed, use the Tree network latency", tuning.cc L386-388; review34)
    chain_net = np.where(n0 > 1 + 1e-9, COLLNET_CHAIN_NET_LATENCY, NCCL_HW_LATENCY["net"]["tree"][_PI["simple"]])
    # the fullest node's chain (nccl_chain_hops); NCCL's estimate 2 (nRanks / nNodes - 1) intraLat (tuning.cc L423)
    lat_c = 2.0 * nccl_chain_hops(pl, estimate) * (COLLNET_CHAIN_NVLINK_LATENCY + intra_lat) + chain_net + net_lat
    t_c = lat_c + S / chain_bw + red
    best = np.where(sharp_outer & multi, np.minimum(best, t_c), best)
    return np.where(p > 1, best, 0.0)


def nvls_allreduce_applies(pl: Placement) -> np.ndarray:
    """Whether NCCL can run an all-reduce on the placed group as NVLS / NVLSTree: the NVLink tier runs NVLS
    (:func:`nvls_on`) and the group has at least 2 ranks in one of its domains (CollNet across nodes is not NVLS)."""
    ok = np.zeros(pl.p.shape, dtype=bool)
    if nvls_on(pl.network.tiers):
        ok = ok | (pl.c[0] > 1.5)
    return ok


def inr_applies(pl: Placement) -> np.ndarray:
    """Whether one of NCCL's in-network-reduction algorithms applies to the placed group: tier 0 (NVLink)
    reduces in the switch and the group has at least 2 ranks in one of its domains (NVLS/NVLSTree,
    :func:`nvls_allreduce_applies`), or an outer tier the group spans reduces in the network and the group spans
    several tier-0 domains (CollNet/SHARP)."""
    ok = nvls_allreduce_applies(pl)
    for i in range(1, pl.ntiers):
        if pl.inr[i]:
            ok = ok | (pl.level(i) > 1 + 1e-9)
    return ok


# ------------------------------------------------------------------------------------------------
# Reduce-scatter / all-gather beyond Ring: NVLS (one NVLink-SHARP domain) and PAT (one GPU per node)
# ------------------------------------------------------------------------------------------------

#: PAT (tuning.cc, v2.30.7): baseLatencies 8 us (every protocol; AG/RS PAT runs Simple only), busBw x0.75 on
#: the Tree graph (init.cc ``graphs[]``: PAT uses treeGraph), latency ``log2i(nNodes) x interLat / 3.5 +
#: 2.8 us x nRanks`` with interLat the NET Tree Simple hop at one GPU per node ("With ppn=1 latencies are fully
#: exposed, use the Tree network latency").
PAT_BASE_LATENCY = 8.0e-6
PAT_BW = 0.75
PAT_LOG_LATENCY_DIV = 3.5
PAT_RANK_LATENCY = 2.8e-6


def nvls_gather_applies(pl: Placement) -> np.ndarray:
    """Whether NCCL's NVLS reduce-scatter/all-gather applies to the placed group: tier 0 is an NVLink tier that
    declares in-network reduction (NVLink SHARP), the whole group lies in one tier-0 domain (multi-node NVLS
    AG/RS needs a CollNet plugin with iallgather/ireducescatter and one NIC head per GPU, tuning.cc, busBw = 0
    otherwise; enqueue.cc skips NVLS without CollNet across nodes), with 2 to 32 ranks there (NVLS needs 2
    channels; enqueue.cc skips non-AllReduce NVLS when localRanks > NCCL_MAX_NVLS_ARITY = 32; the ranks of the
    NVLink domain are read as NCCL's local ranks, modelling assumption for multi-node NVLink)."""
    ok = np.zeros(pl.p.shape, dtype=bool)
    if nvls_on(pl.network.tiers):
        ok = (pl.domains(0) < 1.5) & (pl.c[0] > 1.5) & (pl.c[0] <= NVLS_MAX_ARITY + 1e-9)
    return ok


def pat_applies(pl: Placement) -> np.ndarray:
    """Whether NCCL's PAT reduce-scatter/all-gather applies: one group rank per tier-0 domain (ncclPatEnable:
    ``nNodes == nRanks``, "PAT only supports 1 GPU per node"), p > 1, on a GPU (NCCL) network, i.e. no ICI tier
    (:func:`resolve_family`)."""
    if not runs_nccl(pl.network):
        return np.zeros(pl.p.shape, dtype=bool)
    return (pl.c[0] < 1.5) & (pl.p > 1.5)


def nccl_nvls_gather_time(op: str, S: np.ndarray, pl: Placement, gamma: float = 0.0) -> np.ndarray:
    """NCCL's NVLS reduce-scatter / all-gather of a full buffer S on one NVLink-SHARP domain, as tuning.cc
    (v2.30.7 ``ncclTopoTuneModel``, ``ncclTopoGetAlgoTime``) models it; inf where :func:`nvls_gather_applies`
    does not hold.

    With ``n = p`` ranks in the domain, ``k = min(32, n)`` NVLS heads, the NVLS graph ``k bw = B_0 k / (k + 1)``
    (as for the all-reduce, :func:`nccl_inr_allreduce_time`) and ``eff`` = nvlsEfficiency of the generation:

    ``busBw = k bw eff (k - 1)/k (n - 1)/n``   (intraBw "x (ppn-1)/ppn" for non-AllReduce),
    ``T = L_0(25 us) + S / busBw [+ (p-1)/p S gamma for reduce-scatter]`` (``L_0`` as in
    :func:`nccl_inr_allreduce_time`: the NVLink NVLS hwLatency read on tier 0's measured hop).

    NCCL converts busBw to algBw only for Ring and for all-reduce ("if (!(a != NCCL_ALGO_RING && (coll ==
    ncclFuncAllGather || coll == ncclFuncReduceScatter)))"), so NVLS AG/RS is charged the whole S (nBytes =
    nRanks x count, enqueue.h ``ncclFuncMaxSendRecvCount``) at busBw; latency = the NVLink NVLS hwLatency (25 us,
    base 0) on the measured hop. Simple only; no channel ramp (NVLS runs its fixed nvlsChannels). The Blackwell
    NVLS_CALIBRATION, fitted on all-reduce, is not applied. Charging the whole S matches the traffic: an NVLS
    all-gather GPU sends S/N and receives S, a reduce-scatter GPU sends S and receives S/N, against the ring's
    (N-1)S/N each way, so NVLS is slower than ring for them at large sizes (sjeaugey in NVIDIA/nccl#1083; 8x H100
    ring vs NVLS reduce_scatter_perf in NVIDIA/nccl#1047)."""
    S = np.asarray(S, dtype=float)
    p = pl.p
    ok = nvls_gather_applies(pl)
    shape = np.broadcast(S, p).shape
    if not np.any(ok):
        return np.full(shape, np.inf)
    gen = nvls_generation(pl.network.tiers[0], pl.network.generation)
    n0 = pl.c[0]
    k = np.minimum(NVLS_MAX_ARITY, n0)
    bus = pl.bw[0] * k / (k + 1.0) * NVLS_EFFICIENCY[gen] * (k - 1.0) / k * (n0 - 1.0) / n0
    red = (p - 1) / p * S * gamma if op == "reducescatter" else 0.0 * S
    lat = _measured(float(pl.alpha[0]), _link_class(pl.network.tiers[0], 0), NVLS_LATENCY)
    with np.errstate(divide="ignore", invalid="ignore"):  # bus = 0 only where NVLS does not apply (masked)
        t = lat + S / bus + red
    return np.where(ok, t, np.inf)


def nccl_pat_time(op: str, S: np.ndarray, pl: Placement, gamma: float = 0.0) -> np.ndarray:
    """NCCL's PAT (Parallel Aggregated Trees) reduce-scatter / all-gather of a full buffer S at one GPU per node,
    as tuning.cc (v2.30.7) models it; inf where :func:`pat_applies` does not hold.

    ``T = 8 us + log2i(p) alpha_net / 3.5 + 2.8 us x p + S / (0.75 busBw) [+ (p-1)/p S gamma for RS]``

    with busBw the Tree graph's bottleneck (:meth:`Placement.bottleneck` with ``TREE_FLOWS``; PAT uses NCCL's
    treeGraph), no algBw conversion (non-Ring AG/RS, as :func:`nccl_nvls_gather_time`), and ``alpha_net`` the
    Tree Simple hop (:func:`hop_latency`, NCCL's NET Tree Simple 14 us less its Ring LL 2.7 us on top of the
    measured ``Tier.latency``) of the slowest tier the group spans (NCCL's one interLat; the outermost on every
    built-in cluster, where latency grows outward; a max so that no spanned tier's latency is dropped, coll34).
    Simple only; no channel ramp.
    Every rank still moves (p-1)/p S through its NIC, so the NIC bound holds: S / (0.75 B) > (p-1)/p S / B."""
    S = np.asarray(S, dtype=float)
    p = pl.p
    ok = pat_applies(pl)
    shape = np.broadcast(S, p).shape
    if not np.any(ok):
        return np.full(shape, np.inf)
    alpha = np.zeros(p.shape)
    for i in range(1, pl.ntiers):
        spanned = pl.level(i) > 1 + 1e-9
        a_i = _hop(float(pl.alpha[i]), _link_class(pl.network.tiers[i], i), "tree", "simple")
        alpha = np.where(spanned, np.maximum(alpha, a_i), alpha)  # the slowest spanned tier's (coll34: every tier's)
    lat = PAT_BASE_LATENCY + _log2i(p) * alpha / PAT_LOG_LATENCY_DIV + PAT_RANK_LATENCY * p
    bus = PAT_BW * pl.bottleneck(TREE_FLOWS)
    red = (p - 1) / p * S * gamma if op == "reducescatter" else 0.0 * S
    return np.where(ok, lat + S / bus + red, np.inf)


#: NCCL's own reduce-scatter/all-gather algorithms that the names ``hierarchical`` (NVLS) and ``rd`` (PAT) stand
#: for where they apply: name -> (where it applies, its time). The one table algorithm_time, auto_eligible and
#: collective_time read.
NCCL_GATHER_OWN: dict[str, tuple[Callable[[Placement], np.ndarray],
                                 Callable[[str, np.ndarray, Placement, float], np.ndarray]]] = {
    "hierarchical": (nvls_gather_applies, nccl_nvls_gather_time), "rd": (pat_applies, nccl_pat_time)}

# ------------------------------------------------------------------------------------------------
# Tuner plugin: aws-ofi-nccl's region tuner on p5/p5e (docs/model.md#tuner-plugin)
# ------------------------------------------------------------------------------------------------

#: aws-ofi-nccl's TUNER_MAX_SIZE (100 GiB) and TUNER_MAX_RANKS (2^20), the far corner its open regions are
#: extended to (include/tuner/nccl_ofi_tuner_region.h, v1.16.3 031a9e77).
OFI_TUNER_MAX = (100.0 * 1024.0**3, 1024.0 * 1024.0)


def _ofi_extend(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    """aws-ofi-nccl ``extend_region(a, b, z)`` with z = OFI_TUNER_MAX (src/tuner/nccl_ofi_regions.cpp, v1.16.3):
    the line a-b continued to the far corner's size or rank bound, whichever it reaches first."""
    zx, zy = OFI_TUNER_MAX
    if a[0] == b[0]:
        return (a[0], zy)
    if a[1] == b[1]:
        return (zx, a[1])
    m = (a[1] - b[1]) / (a[0] - b[0])
    c = b[1] - m * b[0]
    return (zx, m * zx + c) if m * zx + c < zy else ((zy - c) / m, zy)


_X_TREE = _ofi_extend((402653184, 2048), (402653184, 4096))
_X_BIG = _ofi_extend((8053063680, 160), (9663676416, 192))
#: aws-ofi-nccl v1.16.3 (031a9e77; unchanged at 2daf7d30) src/tuner/nccl_ofi_regions.cpp
#: region_init_internal_p5_p5e, all-reduce at 8 ranks a node (nRanks == 8 nNodes; the 2- and 1-rank tables
#: follow): (this module's algorithm, NCCL protocol, polygon in (message bytes, ranks)), checked in this order,
#: the first that holds the point (inside or on an edge, is_inside_region) picks; a point in none falls back to
#: NCCL's own choice.
#: NCCL_ALGO_NVLS_TREE is ``hierarchical`` here (nccl_inr_allreduce_time's NVLSTree on one NIC-joined level).
OFI_P5_ALLREDUCE_8PPN: tuple[tuple[str, str, tuple[tuple[float, float], ...]], ...] = (
    ("tree", "ll128", ((0, 16), (31457280, 16), (37748736, 32), (117440512, 64), (301989888, 128),
                       (301989888, 256), (335544320, 512), (536870912, 1024), (402653184, 2048),
                       (402653184, 4096), _X_TREE, (0, _X_TREE[1]))),
    ("hierarchical", "simple", ((31457281, 16), (OFI_TUNER_MAX[0], 16), (31457281, 16))),
    ("ring", "ll128", ((31457280, 17), (1073741824, 17), (2147483648, 64), (2147483648, 128),
                       (1342177280, 160), (2147483648, 256), (1074790400, 256), (444596224, 160),
                       (301989888, 128), (117440512, 64), (37748736, 32))),
    ("hierarchical", "simple", ((2147483648, 128), (6442450944, 128), (8053063680, 160), (9663676416, 192),
                                _X_BIG, _X_TREE, (402653184, 4096), (402653184, 2048), (536870912, 1024),
                                (335544320, 512), (301989888, 256), (310378496, 160), (444596224, 160),
                                (1074790400, 256), (2684354560, 256), (2147483648, 224), (1342177280, 160))),
    ("ring", "simple", ((1073741824, 17), (_X_BIG[0], 17), _X_BIG, (9663676416, 192), (8053063680, 160),
                        (2684354560, 64), (1610612736, 32))),
)
_X2_TREE_LL128 = _ofi_extend((88160256, 128), (178163712, 256))
_X2_TREE_SIMPLE_1 = _ofi_extend((787480576, 128), (1073741824, 256))
_X2_TREE_SIMPLE_2 = _ofi_extend((257114112, 128), (269484032, 256))
#: The same function's all-reduce table at 2 ranks a node (nRanks == 2 nNodes), in its order (the second Tree
#: LL128 and the Tree Simple at 4 ranks are degenerate: their edge at 4 ranks only).
OFI_P5_ALLREDUCE_2PPN: tuple[tuple[str, str, tuple[tuple[float, float], ...]], ...] = (
    ("tree", "ll128", ((0, 4), (1314816, 4), (1051648, 8), (1051648, 12), (2367488, 16), (5525504, 32),
                       (9473024, 64), (88160256, 128), (178163712, 256), _X2_TREE_LL128, (0, _X2_TREE_LL128[1]))),
    ("ring", "ll128", ((1314816, 4), (19736576, 4), (41842688, 8), (296747008, 64), (257114112, 128),
                       (269484032, 256), (178163712, 256), (88160256, 128), (9473024, 64), (5525504, 32),
                       (2367488, 16), (1051648, 12), (1051648, 8), (1314816, 4))),
    ("hierarchical", "simple", ((19736576, 4), (81844224, 4), (275775488, 8), (275775488, 48), (296747008, 64),
                                (41842688, 8))),
    ("tree", "ll128", ((81844224, 4), (269484032, 4), (81844224, 4))),
    ("tree", "simple", ((269484032, 4), (OFI_TUNER_MAX[0], 4), (269484032, 4))),
    ("ring", "simple", ((81844224, 5), (OFI_TUNER_MAX[0], 5), (OFI_TUNER_MAX[0], 32), (1073741824, 40),
                        (1073741824, 128), (787480576, 128), (296747008, 64), (275775488, 48), (275775488, 8),
                        (81844224, 5))),
    ("tree", "simple", ((296747008, 64), (787480576, 128), (1073741824, 256), _X2_TREE_SIMPLE_1, _X2_TREE_SIMPLE_2,
                        (269484032, 256), (257114112, 128))),
    ("hierarchical", "simple", (_X2_TREE_SIMPLE_1, (1073741824, 256), (787480576, 128), (1073741824, 128),
                                (1073741824, 40), (OFI_TUNER_MAX[0], 32))),
)
_X1_TREE = _ofi_extend((9999360, 64), (119477248, 128))
_X1_RING = _ofi_extend((4736000, 2), (269484032, 128))
#: The same function's tables at one rank a node (nRanks == nNodes): all-reduce, all-gather, reduce-scatter.
OFI_P5_ALLREDUCE_1PPN: tuple[tuple[str, str, tuple[tuple[float, float], ...]], ...] = (
    ("tree", "ll128", ((0, 16), (2367488, 16), (9999360, 64), (119477248, 128), _X1_TREE)),
    ("ring", "ll128", ((0, 2), (4736000, 2), (269484032, 128), _X1_RING, _X1_TREE, (119477248, 128), (9999360, 64),
                       (2367488, 16), (0, 16))),
    ("ring", "simple", ((4736000, 2), (OFI_TUNER_MAX[0], 2), _X1_RING, (269484032, 128))),
)
_X1_AG = _ofi_extend((4194304, 2), (8589934592, 2048))
_X1_RS = _ofi_extend((8388608, 2), (4294967296, 1024))
OFI_P5_ALLGATHER_1PPN: tuple[tuple[str, str, tuple[tuple[float, float], ...]], ...] = (
    ("ring", "simple", ((4194304, 2), (OFI_TUNER_MAX[0], 2), _X1_AG, (8589934592, 2048))),)
OFI_P5_REDUCESCATTER_1PPN: tuple[tuple[str, str, tuple[tuple[float, float], ...]], ...] = (
    ("ring", "simple", ((8388608, 2), (OFI_TUNER_MAX[0], 2), _X1_RS, (4294967296, 1024))),)
#: Every p5 table by (collective, ranks a node); any other pair: NCCL's own choice.
OFI_P5_TABLES: dict[tuple[str, int], tuple[tuple[str, str, tuple[tuple[float, float], ...]], ...]] = {
    ("allreduce", 8): OFI_P5_ALLREDUCE_8PPN, ("allreduce", 2): OFI_P5_ALLREDUCE_2PPN,
    ("allreduce", 1): OFI_P5_ALLREDUCE_1PPN, ("allgather", 1): OFI_P5_ALLGATHER_1PPN,
    ("reducescatter", 1): OFI_P5_REDUCESCATTER_1PPN,
}
#: aws-ofi-nccl hands nodes <= 2 back to NCCL's own tuner ("regions are not well defined",
#: region_get_coll_info_internal_v3, v1.16.3).
OFI_MIN_NODES = 3.0


def in_region(x: np.ndarray, y: np.ndarray, poly: Sequence[tuple[float, float]]) -> np.ndarray:
    """Whether points (x, y) lie inside the polygon or on one of its edges (aws-ofi-nccl is_inside_region:
    an edge point counts; inside by even-odd ray casting). Broadcasts over x and y."""
    x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    on_edge = np.zeros(x.shape, dtype=bool)
    crosses = np.zeros(x.shape, dtype=int)
    n = len(poly)
    for i in range(n):
        (ax, ay), (bx, by) = poly[i], poly[(i + 1) % n]
        dx, dy = bx - ax, by - ay
        seg = math.hypot(dx, dy)
        if seg == 0.0:
            continue
        cross = dx * (y - ay) - dy * (x - ax)
        t = (dx * (x - ax) + dy * (y - ay)) / seg**2
        on_edge |= (np.abs(cross) / seg <= 1e-6) & (t >= 0.0) & (t <= 1.0)
        if ay != by:
            straddles = (ay > y) != (by > y)
            with np.errstate(divide="ignore", invalid="ignore"):
                x_at = ax + (y - ay) * dx / dy
            crosses += straddles & (x < x_at)
    return on_edge | (crosses % 2 == 1)


def tuner_plugin_choice(op: str, S: np.ndarray, pl: Placement) -> tuple[np.ndarray, tuple[tuple[str, str], ...]]:
    """The (algorithm, protocol) a tuner plugin the network names imposes, per element: an index into the
    returned ``(algorithm, protocol)`` list, -1 where it leaves the choice to NCCL (here: the model's fastest NCCL
    algorithm). docs/model.md#tuner-plugin.

    ``aws-ofi-p5`` (aws-ofi-nccl v1.16.3 region tuner, p5/p5e): a group with 8, 2 or 1 ranks in every tier-0
    (NVLink) domain on at least 3 of them (``nRanks == 8 / 2 / 1 x nNodes``, region_init_internal_p5_p5e): the
    first region of that layout's table (:data:`OFI_P5_TABLES`: all-reduce at 8, 2 and 1 ranks a node,
    all-gather and reduce-scatter at 1) holding (S, p), skipping NVLSTree where NVLS does not apply (the tuner's
    ``nvlsSupport == 0`` / NCCL's NCCL_ALGO_PROTO_IGNORE) and LL128 where the network runs no LL128
    (:func:`protocols_for`)."""
    S = np.asarray(S, dtype=float)
    shape = np.broadcast(S, pl.p).shape
    pick = np.full(shape, -1)
    tables = [(ppn, t) for (o, ppn), t in OFI_P5_TABLES.items() if o == op]
    if pl.network.nccl_tuner != "aws-ofi-p5" or not tables:
        return pick, ()
    choices = tuple((a, pr) for _, t in tables for a, pr, _ in t)
    nodes = pl.p / pl.c[0]
    many = nodes >= OFI_MIN_NODES - 1e-9
    nvls = np.broadcast_to(inr_applies(pl), shape) if op == "allreduce" else np.zeros(shape, dtype=bool)
    protos = protocols_for(pl.network)
    y = np.broadcast_to(pl.p, shape)
    r = 0
    for ppn, table in tables:
        applies = np.broadcast_to((np.abs(pl.c[0] - ppn) < 1e-9) & many, shape)
        for algo, proto, poly in table:
            if proto in protos and np.any(applies):
                ok = applies & (pick < 0) & in_region(S, y, poly)
                if algo == "hierarchical":
                    ok &= nvls
                pick = np.where(ok, r, pick)
            r += 1
    return pick, choices


def _tuner_time(op: str, S: np.ndarray, pl: Placement, gamma: float,
                pick: np.ndarray, choices: tuple[tuple[str, str], ...]) -> np.ndarray:
    """Time of the tuner plugin's (algorithm, protocol) per element where ``pick >= 0`` (nan elsewhere)."""
    out = np.full(pick.shape, np.nan)
    for r, (algo, proto) in enumerate(choices):
        here = pick == r
        if np.any(here):
            t = np.broadcast_to(algorithm_time(op, algo, S, pl, gamma=gamma, protocols=(proto,)), pick.shape)
            out = np.where(here, t, out)
    return out


# ------------------------------------------------------------------------------------------------
# One algorithm over its protocol lines; the auto choice
# ------------------------------------------------------------------------------------------------

def algorithm_time(op: str, algorithm: str, S: np.ndarray, pl: Placement, *, gamma: float = 0.0,
                   protocols: Sequence[str] | None = None, estimate: bool = False) -> np.ndarray:
    """Time of one named algorithm on a placed group: the minimum over NCCL's protocol lines (LL, LL128,
    Simple); 0 when p = 1. On a network NCCL does not run (:func:`runs_nccl`: a TPU ICI tier) the bare
    alpha-beta form (:func:`scalemodel.cost.algorithms.algorithm_time`) and none of what follows.

    - ``tree`` all-reduce: :func:`nccl_tree_allreduce_time` (``estimate``: with NCCL's own intra-node hop count,
      :func:`nccl_chain_hops`, as its tuner sees the group: :func:`nccl_tuner_picks_inr`).
    - ``hierarchical`` reduce-scatter / all-gather where NVLS applies: NCCL's NVLS (:func:`nccl_nvls_gather_time`);
      ``rd`` reduce-scatter / all-gather at one GPU per node on a GPU network: NCCL's PAT (:func:`nccl_pat_time`),
      NCCL's log-step algorithm for them (elsewhere these names keep their alpha-beta forms).
    - everything else: ``base[p] + T_algo(S_eff)`` on the group's links as protocol p sees them
      (:func:`protocol_links`, Ring hop row), with ``S_eff`` from :func:`channel_ramp_size` (Ring LL's
      threshold x p for ``ring`` and for ``hierarchical``, whose levels are rings; p is the whole group's
      size, so one-level hierarchical equals the flat ring). ``ring`` all-reduce with Simple across
      nodes takes NCCL's x1.4 latency "plateau" once S / (nChannels p) >= 64. ``ring`` with LL (one node too):
      ``max(T, base + T_lat + S f_bus / llMaxBw)`` (:func:`ll_max_busbw`; f_bus the nccl-tests busbw factor),
      NCCL's ``busBw = min(llMaxBw, busBw * .5)``: an aggregate cap on the whole message's bytes (NCCL's own
      ``nBytes / busBw``), so the thread ramp's ``S_eff`` stays on the uncapped line.

    The bare alpha-beta forms without any of this are :func:`scalemodel.cost.algorithms.algorithm_time`.
    """
    if algorithm not in APPLICABLE[op]:
        raise InputError(f"algorithm {algorithm!r} does not apply to {op}", where="algorithm",
                         allowed=allowed(op))
    if not runs_nccl(pl.network):  # XLA on TPU ICI / DCN: the bare alpha-beta form, no NCCL protocol layer
        t = algorithms.algorithm_time(op, algorithm, S, pl, gamma)
        return np.where(_as_shape(pl.p, t.shape) > 1, t, 0.0)
    protos = tuple(protocols) if protocols is not None else protocols_for(pl.network)
    inr = np.zeros(pl.p.shape, dtype=bool)
    # NCCL's own algorithm standing for this name where it applies (inr: where)
    special: Callable[[str, np.ndarray, Placement, float], np.ndarray] | None = None
    if algorithm == "hierarchical" and op == "allreduce":
        inr = inr_applies(pl)
        if np.all(inr):
            return nccl_inr_allreduce_time(S, pl, gamma)
    elif op in ("reducescatter", "allgather") and algorithm in NCCL_GATHER_OWN:
        applies, special = NCCL_GATHER_OWN[algorithm]
        inr = applies(pl)
    if special is not None and np.all(inr):
        return np.where(np.broadcast_to(pl.p, np.broadcast(S, pl.p).shape) > 1, special(op, S, pl, gamma), 0.0)
    bus = pl.bottleneck()
    nc = nccl_channels(bus)
    multi_node = pl.domains(0) > 1.5
    best = None
    # the Tree links of every protocol keep the group's line rates (bw_factor 1): one pricing of its caps
    caps = tree_channel_caps(pl) if algorithm == "tree" and op == "allreduce" else None
    for proto in protos:
        if algorithm == "tree" and op == "allreduce":
            t = nccl_tree_allreduce_time(S, protocol_links(pl, proto, "tree", bw_factor=1.0), proto,
                                         pl.bottleneck(TREE_FLOWS), nc, gamma, caps=caps, estimate=estimate)
        else:
            pp = protocol_links(pl, proto, "ring")
            fn = ALGO_FUNCS[algorithm]
            S_eff = channel_ramp_size(S, proto, nc, pp.p, ring_ll=algorithm in ("ring", "hierarchical"))
            t = BASE_LATENCY[proto] + fn(op, S_eff, pp, gamma)
            if algorithm == "ring" and proto == "ll":  # NCCL's llMaxBw (ll_max_busbw, one node too)
                cap = ll_max_busbw(pl)
                if np.any(np.isfinite(cap)):
                    lat0 = BASE_LATENCY[proto] + fn(op, 0.0 * S, pp, gamma)
                    t = np.maximum(t, lat0 + S * busbw_factor(op, pp.p) / cap)
            if algorithm == "ring" and op == "allreduce" and proto == "simple":
                lat = BASE_LATENCY[proto] + fn(op, 0.0 * S, pp, gamma)
                plateau = multi_node & (S / (nc * pp.p) >= RING_PLATEAU_BYTES)
                t = t + np.where(plateau, (RING_PLATEAU - 1.0) * lat, 0.0)
        best = t if best is None else np.minimum(best, t)
    assert best is not None
    if np.any(inr):
        own = special(op, S, pl, gamma) if special is not None else nccl_inr_allreduce_time(S, pl, gamma)
        best = np.where(inr, own, best)
    best = topology.floored(op, S, pl, best)  # a torus group: a node's bytes over its dimensions' links
    return np.where(_as_shape(pl.p, best.shape) > 1, best, 0.0)


def _as_shape(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``np.broadcast_to(x, shape)``, or ``x`` itself where it already has that shape (the common case of a grid's
    columns; the same elements either way, without the view's cost: evalspeed41)."""
    return x if isinstance(x, np.ndarray) and x.shape == shape else np.broadcast_to(x, shape)


def resolve_family(network: Network, family: str = "auto") -> str:
    """``"nccl"`` or ``"all"`` (see ``FAMILIES``); ``"auto"`` is "all" on ICI (TPU) networks, else "nccl"."""
    if family not in FAMILIES:
        raise InputError(f"unknown algorithm family {family!r}", where="family", allowed=", ".join(FAMILIES))
    if family == "auto":
        return "nccl" if runs_nccl(network) else "all"
    return family


def runs_nccl(network: Network) -> bool:
    """Whether NCCL (or RCCL) runs the network's collectives: no tier is a TPU ICI link (``protocol: ici``).
    A TPU pod or multislice cluster runs XLA's collectives over ICI and the DCN, not NCCL (the catalog's TPU
    clusters: 'TPU pods run no NCCL'), so NCCL's protocol lines, base latencies, channel ramp, llMaxBw cap and
    Tree corrections do not apply there (docs/model.md#dcn-allreduce, tpucoll30)."""
    return not any(t.protocol.lower() == "ici" for t in network.tiers)



def nccl_tuner_picks_inr(S: np.ndarray, pl: Placement, gamma: float = 0.0) -> np.ndarray:
    """Whether NCCL's tuner would choose its in-network-reduction all-reduce (NVLS/NVLSTree/CollNetChain) for
    ``S`` bytes: its own estimate of that algorithm (:func:`nccl_inr_allreduce_time` with ``estimate=True``) is
    at most its own estimate of Ring and Tree, which is this module's Ring/Tree model with every hop at NCCL's
    absolute ``hwLatencies`` (Ring LL hop NVLink 0.6, PCI 1.0, NET 2.7 us, plus NCCL's per-protocol
    increments) instead of the measured ``Tier.latency`` (tuning.cc ncclTopoTuneModel / ncclTopoGetAlgoTime;
    docs/model.md#in-network-reduction). NCCL picks by its own estimates, so a size where the measured-hop
    ring would be slower than NVLS but NCCL's estimate is not still runs Ring/Tree. Both estimates count the
    intra-node chain as NCCL's tuning formula does, ``nRanks / nNodes - 1`` (:func:`nccl_chain_hops`)."""
    own = np.array([NCCL_HW_LATENCY[_link_class(t, i)]["ring"][0] for i, t in enumerate(pl.network.tiers)])
    pn = pl.relinked(own, pl.bandwidth)
    t_inr = nccl_inr_allreduce_time(S, pn, gamma, estimate=True)
    t_rt = np.minimum(algorithm_time("allreduce", "ring", S, pn, gamma=gamma),
                      algorithm_time("allreduce", "tree", S, pn, gamma=gamma, estimate=True))
    return np.asarray(t_inr <= t_rt)


def auto_eligible(op: str, algorithm: str, pl: Placement, family: str, S: np.ndarray | None = None,
                  gamma: float = 0.0) -> np.ndarray:
    """Whether ``auto`` may pick ``algorithm`` for the placed group (``family`` already resolved).
    Family "nccl": ``NCCL_FAMILY[op]``, with ``hierarchical`` (standing for NVLS/NVLSTree/CollNetChain) only
    where in-network reduction applies (:func:`inr_applies`; for reduce-scatter/all-gather where NVLS applies,
    :func:`nvls_gather_applies`), and ``rd`` (standing for PAT) only at one GPU per node (:func:`pat_applies`).
    Family "all": everything, except one-shot ``direct`` (load/store access to every peer) beyond the innermost
    tier, other than for all-to-all and send/recv; and, on a (sub-)torus group, an algorithm without a link-level
    torus form (:func:`topology.torus_unpriced`; torus31, docs/model.md#torus)."""
    shape = pl.p.shape
    if family == "nccl":
        if algorithm not in NCCL_FAMILY[op]:
            return np.zeros(shape, dtype=bool)
        if op in ("reducescatter", "allgather") and algorithm in NCCL_GATHER_OWN:
            return NCCL_GATHER_OWN[algorithm][0](pl)  # NVLS: one NVLink-SHARP domain; PAT: one GPU per node
        if algorithm == "hierarchical":
            # where in-network reduction applies; not gated on NCCL's tuner estimate, whose ranking can flip
            # as a what-if changes the bandwidth and would make more bandwidth a slower step
            # (nccl_tuner_picks_inr reports what NCCL's own estimate would choose)
            return inr_applies(pl)
        return np.ones(shape, dtype=bool)
    if algorithm == "direct" and op not in ("alltoall", "sendrecv"):
        ok = pl.inside(0)
    else:
        ok = np.ones(shape, dtype=bool)
    unpriced = topology.torus_unpriced(op, algorithm, pl)  # torus31: every other row is priced link by link
    if unpriced is not None:
        ok = ok & ~unpriced
    return np.asarray(ok)


def best_algorithm(op: str, S: np.ndarray, pl: Placement, *, gamma: float = 0.0, family: str = "auto"
                   ) -> tuple[np.ndarray, tuple[str, ...], np.ndarray, np.ndarray]:
    """Every applicable algorithm's time on the placed group and the fastest eligible one per element.

    Returns ``(times, names, best_index, best_time)``: ``times`` has shape (len(names), *broadcast shape)
    for every algorithm in ``APPLICABLE[op]``; ``best_index`` indexes ``names`` and only points at an
    algorithm of the ``family`` (:func:`resolve_family`; on GPU clusters NCCL's own: ring, tree, and
    NVLS/CollNet as ``hierarchical`` where a tier declares in-network reduction). Where a tuner plugin the
    network names decides (:func:`tuner_plugin_choice`), ``best_index`` is its algorithm and ``best_time`` (and
    that algorithm's row of ``times``) that algorithm at its protocol, fastest or not.
    """
    fam = resolve_family(pl.network, family)
    names = APPLICABLE[op]
    shape = np.broadcast(S, pl.p).shape
    times = np.stack([np.broadcast_to(algorithm_time(op, a, S, pl, gamma=gamma), shape) for a in names])
    elig = np.stack([np.broadcast_to(auto_eligible(op, a, pl, fam, S, gamma), shape) for a in names])
    masked = np.where(elig, times, np.inf)
    idx = np.argmin(masked, axis=0)
    best = np.take_along_axis(times, idx[None, ...], axis=0)[0]
    if fam == "nccl":  # a tuner plugin's pick replaces the fastest where it decides (tuner_plugin_choice)
        pick, choices = tuner_plugin_choice(op, S, pl)
        if np.any(pick >= 0):
            t_pick = _tuner_time(op, S, pl, gamma, pick, choices)
            i_pick = np.zeros(pick.shape, dtype=int)
            for r, (algo, _) in enumerate(choices):
                i_pick = np.where(pick == r, names.index(algo), i_pick)
            idx = np.where(pick >= 0, i_pick, idx)
            best = np.where(pick >= 0, t_pick, best)
            # the picked algorithm's row is its time at the picked protocol (what NCCL runs under that name)
            times = times.copy()
            row = np.take_along_axis(times, idx[None, ...], axis=0)[0]
            np.put_along_axis(times, idx[None, ...], np.where(pick >= 0, t_pick, row)[None, ...], axis=0)
    return times, names, idx, best


#: Priced.hierarchical where auto weighed no hierarchical all-reduce (read-only: shared by every such result)
_UNWEIGHED = np.full((), np.inf)
_UNWEIGHED.flags.writeable = False


class Priced(NamedTuple):
    """A collective's seconds (:func:`priced_collective`) and, for an all-reduce whose ``auto`` choice weighed
    ``hierarchical``, that algorithm's seconds as it weighed them: NCCL's in-network reduction (NVLS / NVLSTree /
    CollNetChain, :func:`nccl_inr_allreduce_time`, inf where none applies) on GPU clusters; inf where nothing was
    weighed (another operation, a named algorithm, no element where it is eligible) and where a tuner plugin
    decides on another algorithm (:func:`tuner_plugin_choice`: NCCL runs the pick, not the faster NVLS). What the
    contention model's NVLS test compares with ``time`` (``engine.model_parallel_comm.nvls_allreduce``), so it is
    priced once."""

    time: np.ndarray
    hierarchical: np.ndarray


def collective_time(op: str, S: np.ndarray, pl: Placement, *, algorithm: str = "auto", gamma: float = 0.0,
                    family: str = "auto") -> np.ndarray:
    """Seconds for collective ``op`` of ``S`` bytes on the placed group: the named algorithm
    (:func:`algorithm_time`), or with ``"auto"`` the fastest eligible algorithm of ``family`` per element
    (the same as ``best_algorithm(...)[3]``, evaluating only the family's eligible algorithms; a tuner plugin's
    pick where it decides, :func:`tuner_plugin_choice`). :func:`priced_collective`'s ``time``."""
    return priced_collective(op, S, pl, algorithm=algorithm, gamma=gamma, family=family).time


def priced_collective(op: str, S: np.ndarray, pl: Placement, *, algorithm: str = "auto", gamma: float = 0.0,
                      family: str = "auto") -> Priced:
    """:func:`collective_time` with the hierarchical all-reduce's seconds the ``auto`` choice weighed
    (:class:`Priced`). With family "nccl", auto prices NCCL's own algorithm for ``hierarchical`` (in-network
    reduction for an all-reduce, NVLS / PAT for reduce-scatter and all-gather) and not the alpha-beta namesake,
    which it could not pick where those do not apply."""
    key = None
    if _REMEMBERING[0] and np.size(S) <= REMEMBER_ELEMENTS and isinstance(gamma, float | int):
        sa = np.asarray(S)
        key = ("priced", op, sa.dtype.str, sa.shape, sa.tobytes(), algorithm, float(gamma).hex(), family)
        hit = pl.memo.get(key)
        if hit is not None:
            return Priced(hit.time.copy(), hit.hierarchical if hit.hierarchical is _UNWEIGHED else
                          hit.hierarchical.copy())
    out = _priced_collective(op, S, pl, algorithm, gamma, family)
    if key is not None:
        pl.memo[key] = Priced(np.array(out.time, dtype=float), out.hierarchical if out.hierarchical is _UNWEIGHED
                              else np.array(out.hierarchical, dtype=float))
    return out


#: Whether :func:`priced_collective` keeps its results on the placement (:func:`remembering`); a list so the flag is
#: the module's own, set and restored by the context.
_REMEMBERING: list[bool] = [False]
#: Message-size arrays of at most this many elements are remembered under :func:`remembering`.
REMEMBER_ELEMENTS = 64


@contextmanager
def remembering() -> Iterator[None]:
    """While held, :func:`priced_collective` keeps each result on its placement (:attr:`Placement.memo`, keyed by
    the operation, the message sizes' bytes, the algorithm, gamma and family: everything else it reads is the
    placement's), so a placement made again for an equal group on an equal network (:func:`placement.place` interns
    them) prices the same collective once: a calibration's trials move one factor at a time and leave most groups as
    they were (engine.calibrate_runs, evalspeed41). Each result handed out is a copy, so no caller shares an array
    with another. Not held by default: a collective priced outside it is priced afresh every time."""
    before = _REMEMBERING[0]
    _REMEMBERING[0] = True
    try:
        yield
    finally:
        _REMEMBERING[0] = before


def _priced_collective(op: str, S: np.ndarray, pl: Placement, algorithm: str, gamma: float, family: str) -> Priced:
    """:func:`priced_collective` priced afresh."""
    if algorithm != "auto":
        return Priced(algorithm_time(op, algorithm, S, pl, gamma=gamma), _UNWEIGHED)
    fam = resolve_family(pl.network, family)
    shape = np.broadcast(S, pl.p).shape
    best = np.full(shape, np.inf)
    hier = _UNWEIGHED
    for a in APPLICABLE[op]:
        if fam == "nccl" and a not in NCCL_FAMILY[op]:
            continue
        elig = _as_shape(auto_eligible(op, a, pl, fam, S, gamma), shape)
        if not elig.any():
            continue
        if fam == "nccl" and a == "hierarchical" and op == "allreduce":  # eligible where in-network reduction is
            t = nccl_inr_allreduce_time(S, pl, gamma)
        elif fam == "nccl" and op in ("reducescatter", "allgather") and a in NCCL_GATHER_OWN:
            t = NCCL_GATHER_OWN[a][1](op, S, pl, gamma)
        else:
            t = algorithm_time(op, a, S, pl, gamma=gamma)
        if a == "hierarchical" and op == "allreduce":
            hier = t
        best = np.where(elig, np.minimum(best, t), best)
    if fam == "nccl":  # a tuner plugin's pick replaces the fastest where it decides (tuner_plugin_choice)
        pick, choices = tuner_plugin_choice(op, S, pl)
        if np.any(pick >= 0):
            t_pick = _tuner_time(op, S, pl, gamma, pick, choices)
            best = np.where(pick >= 0, t_pick, best)
            # there NCCL runs the pick: the hierarchical time only where it picked hierarchical, a faster NVLS
            # the tuner passed over is not what runs
            took = np.isin(pick, [r for r, (a, _) in enumerate(choices) if a == "hierarchical"])
            hier = np.where(pick >= 0, np.where(took, t_pick, np.inf), hier)
    return Priced(best, hier)
