"""Hostile-input round 26b: what merged on the morning of round 26: the strategy field bucket_fragments (scale26),
the accelerator field collective_units_nvls (mlpt26, review26b), tidy26's refusal of a field given by a flag and by
--set, the capped known-keys list in unknown-key errors, fp8_attention on every recipe and accelerator family
(fp4_26 / review26a) and calibrate / check / sensitivity files using them.

Each case is one finding of a corpus of 450 cases run one process per case (timeout and memory cap, sequentially on
one core, under /tmp); the CLI contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse)

BASE = ["-c", "dgx-h100", "-m", "llama3-8b", "-n", "64"]


# --- bucket_fragments where nothing prices it ---
# engine/dp_comm.py cuts tensors in the DDP / ZeRO-1/2 buckets only (_whole_tensors); ZeRO-3's reduce-scatters count
# whole tensors (_sharded_parameter_traffic) and FSDP / HSDP reduce one unit at a time, so at zero 3 / fsdp the field
# moved no price and said nothing (llama3-8b on 64 H100, 1 MiB buckets: 0.8107 s either way at zero 3, while zero 1
# goes from 0.849 to 6.25 s).

@pytest.mark.parametrize("zero", ["3", "fsdp", "hsdp"])
def test_bucket_fragments_under_sharded_parameters_is_said_unpriced(cli, zero: str) -> None:  # type: ignore[no-untyped-def]
    args = [*BASE, "--zero", zero, "--set", "strategy.bucket_size=1MiB"]
    if zero == "hsdp":
        args += ["--set", "strategy.shard_group=8"]
    on = accepted(cli, "predict", *args, "--set", "strategy.bucket_fragments=true")
    off = accepted(cli, "predict", *args)
    assert on["step_time_s"] == off["step_time_s"]  # the premise: nothing prices it there
    said = [w for w in on["warnings"] if "bucket_fragments" in str(w)]
    assert len(said) == 1 and "is not priced" in str(said[0]), on["warnings"]
    assert not [w for w in off["warnings"] if "bucket_fragments" in str(w)]


@pytest.mark.parametrize("zero", ["0", "1", "2"])
def test_bucket_fragments_where_it_is_priced_draws_no_warning(cli, zero: str) -> None:  # type: ignore[no-untyped-def]
    args = [*BASE, "--zero", zero, "--set", "strategy.bucket_size=1MiB"]
    on = accepted(cli, "predict", *args, "--set", "strategy.bucket_fragments=true")
    off = accepted(cli, "predict", *args)
    assert on["step_time_s"] > off["step_time_s"]  # ceil(X / S) buckets, more than the whole tensors' count
    assert not [w for w in on["warnings"] if "bucket_fragments" in str(w)]
