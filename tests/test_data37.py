"""data37: the search for runs on the thinnest families found none that qualifies (validation/README.md#data37).

The one figure the section measures for the record is Cisco's MLPerf v5.1 llama31_8b on 8 MI350X (mlcommons/
training_results_v5.1 @441d65f4, Cisco/results/1xC885A_M8-8xMI350X-OAM-288GB/llama31_8b/result_{1..10}.txt). The checks
recompute it from the per-run means typed from those files, and check the section's comparison with AMD's recorded
MI350X row and the listed TPU v4 row it names against training_cases.yaml, so neither drifts from the data."""

from __future__ import annotations

from conftest import ROOT, load_yaml
from test_validation import NEW_CASES, needs_new_cases

README = ROOT / "validation" / "README.md"

#: Mean MLLOG tracked_stats ``throughput`` (samples/s) of each of the ten Cisco MI350X result files, rounded to 0.01
#: (result_1 .. result_10).
CISCO_RUN_MEANS = (23.99, 24.04, 24.08, 24.08, 24.11, 24.10, 24.09, 24.07, 24.04, 24.05)
CISCO_MEAN = 24.067  # mean of the 146 block values (the section's figure)
GBS, SEQ, GPUS = 32, 8192, 8  # MLLOG global_batch_size, max_sequence_length; one node of 8


def _section() -> str:
    text = README.read_text()
    start = text.index('<a id="data37"></a>')
    return text[start:]


def test_cisco_mean_lies_within_its_per_run_means() -> None:
    """The block mean sits inside the per-run means' range and within 0.01 of their mean."""
    assert min(CISCO_RUN_MEANS) <= CISCO_MEAN <= max(CISCO_RUN_MEANS)
    assert abs(sum(CISCO_RUN_MEANS) / len(CISCO_RUN_MEANS) - CISCO_MEAN) < 0.01


def test_cisco_rate_and_gap_to_amd_row_are_as_the_section_says() -> None:
    """24.067 samples/s x 8192 / 8 = 24,645 tokens/s/GPU; against AMD's recorded 24.881 samples/s, 3.3 % lower."""
    rate = CISCO_MEAN * SEQ / GPUS
    assert round(rate) == 24645
    section = _section()
    assert "24,645 tokens/s/GPU" in section and "24.067 samples/s over 146 blocks" in section


@needs_new_cases
def test_comparison_row_and_named_rows_exist_as_the_section_says() -> None:
    cases = {c["id"]: c for c in load_yaml(NEW_CASES)}
    amd = cases["mlpt51_mi350x_llama31_8b_8"]
    assert amd["measured"]["samples_per_s"] == 24.881
    assert amd["parallelism"]["global_batch_seqs"] == GBS and amd["parallelism"]["grad_accum"] == 2
    gap = 1 - CISCO_MEAN / amd["measured"]["samples_per_s"]
    assert round(100 * gap, 1) == 3.3
    assert "3.3 % below AMD's own MI350X row (24.881)" in _section()
    # the paxml 22B 2 x v4-128 config the section names is the listed MaxText row
    assert "maxtext23_v4_22b_2x128" in cases
