"""review23d: the full-mesh tier's refusal names the field that broke it (docs/model.md#full-mesh)."""

from __future__ import annotations

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
