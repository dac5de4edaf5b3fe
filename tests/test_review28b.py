"""review28b: the enabled SM counts of the Blackwell parts, from device reports (not the full-die figure).

GB200 and GB300 report 152 SMs (facebookexperimental/triton pull request #2768: cuBLASLt's occupancy cap on a GB300
bisects to 9728 output elements = 152 SMs x 2048 threads / 32, "the same as GB200's"; ByteDance-Seed/VeOmni pull
request #986: GB200 152 SMs against B200 148); the HGX B200 and B300 report 148 ([B300-DEV] multiProcessorCount).
NVIDIA's 160 SMs for Blackwell Ultra ([NV-BWU-BLOG]) is the full die. The catalog had gb200 148 and gb300 160.
"""

from __future__ import annotations

import pytest

from scalemodel.engine.job import collective_share
from scalemodel.specs import load_accelerator

ENABLED_SMS = {"b200": 148, "b300": 148, "gb200": 152, "gb300": 152}


@pytest.mark.parametrize(("name", "sms"), sorted(ENABLED_SMS.items()))
def test_blackwell_compute_units_are_the_enabled_sm_count(name: str, sms: int) -> None:
    assert load_accelerator(name).compute_units == sms


def test_triton_2768_occupancy_cap_is_the_gb300_sm_count() -> None:
    # the cap the pull request bisects (9728 elements, 9729 no longer matches) is sm_count x 2048 / 32
    assert load_accelerator("gb300").compute_units * 2048 // 32 == 9728


@pytest.mark.parametrize("name", ["gb200", "gb300"])
def test_nvl72_collective_share_is_32_ring_ctas_of_152_sms(name: str) -> None:
    # NCCL's 32 ring channels (one CTA, one SM each) on 152 SMs: 0.2105 of the chip, not 32 / 148 = 0.2162
    acc = load_accelerator(name)
    assert acc.collective_units == 32
    assert collective_share(acc) == pytest.approx(32 / 152, rel=1e-12)
