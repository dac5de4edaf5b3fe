"""review23d: the full-mesh tier (docs/model.md#full-mesh): its refusal names the field that broke it, and the
ring count behind (c_0 - 1)/(span_0 - 1) for RCCL's 2- and 4-rank communicators, counted by hand."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from scalemodel.errors import InputError
from scalemodel.specs import load_cluster


@pytest.mark.parametrize("override, shown", [
    # the flag on a tier that reduces in the network: the message must show that value, not only topology / span
    ("tiers.xgmi.in_network_reduction=true", "in_network_reduction True"),
    ("tiers.ib-leaf.full_mesh=true", "tiers[1]"),
    ("tiers.xgmi.topology=switch", "topology 'switch'"),
])
def test_full_mesh_refusal_shows_the_offending_value(override: str, shown: str) -> None:
    with pytest.raises(InputError) as err:
        load_cluster("mi300x-8", [override])
    msg = str(err.value)
    assert "full_mesh needs" in msg and shown in msg, msg


def _directed_hamiltonian_cycles(n: int) -> list[frozenset[tuple[int, int]]]:
    """Every directed Hamiltonian cycle of n GPUs (the complete symmetric digraph K*_n) as its set of directed
    links, each cycle once (GPU 0 first)."""
    out = []
    for rest in itertools.permutations(range(1, n)):
        order = (0, *rest)
        out.append(frozenset((order[k], order[(k + 1) % n]) for k in range(n)))
    return out


def test_rccl_rings_on_four_gpus_of_the_mesh_reach_all_three_links_only_at_half_speed() -> None:
    """docs/model.md#full-mesh (review23d): why (c_0 - 1)/(span_0 - 1) is what RCCL 0cbce2a7 builds for 4 ranks.
    Its ring search starts at 48 GB/s a channel (speedArrayIntra, search.cc:901), one xGMI link's 48
    (GFX94X_XGMI_WIDTH, topo.h:33), so at that speed rings must be link-disjoint: on K*_4 at most 2 are (3 would
    decompose K*_4, which has no Hamiltonian dicycle decomposition), 2 of the 3 links a GPU has to the others. At the
    next speed, 24 (24/48 > 0.49, search.cc:1095), the 6 directed rings use every link exactly twice: all 3 links.
    Only that solution gives the README's 24 channels (no duplication below 25 GB/s, search.cc:888; nc 4,
    init.cc:1489-1503); the 2-ring one would give 16. Two ranks: one ring at 48 over both directions, duplicated to 2
    and x nc 16 = 32."""
    cycles = _directed_hamiltonian_cycles(4)
    assert len(cycles) == 6
    disjoint = max(k for k in range(1, 4) for combo in itertools.combinations(cycles, k)
                   if len(frozenset().union(*combo)) == 4 * k)
    assert disjoint == 2  # 2 x 48 of the 3 x 48 a GPU has to the others: the search goes on to 24
    uses = Counter(link for c in cycles for link in c)
    assert len(uses) == 12 and set(uses.values()) == {2}  # 6 rings x 24 = 3 links x 48 on every GPU
    assert 6 * 4 == 24 and 2 * 2 * 4 == 16  # README 24 channels (6 rings, nc 4); the 48-speed pair duplicated: 16
    two = _directed_hamiltonian_cycles(2)
    assert two == [frozenset({(0, 1), (1, 0)})] and 1 * 2 * 16 == 32  # README 32 channels for 2 ranks
    # 3 ranks: K*_3 decomposes, 2 link-disjoint rings at full speed use both links of each GPU
    assert max(k for k in (1, 2) for combo in itertools.combinations(_directed_hamiltonian_cycles(3), k)
               if len(frozenset().union(*combo)) == 3 * k) == 2
