"""The lead's own fixes of session 17, each failing without its change."""

from __future__ import annotations

import json
from pathlib import Path

TITAN = "[training]\nlocal_batch_size = 1\nseq_len = 4096\n[parallelism]\ndata_parallel_shard_degree = -1\n"
DENSE = ("-m", "llama3-8b", "-c", "dgx-h100", "-n", "16")


def _predict(cli, path: Path) -> dict:  # type: ignore[no-untyped-def]
    r = cli("predict", *DENSE, "--strategy", str(path), "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)  # type: ignore[no-any-return]


def test_torchtitan_toml_without_ac_mode_prices_torchtitans_default(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """torchtitan's ActivationCheckpoint defaults to mode "selective" with selective_ac_option "2"
    (pytorch/torchtitan@e7c0cae config_manager.py L436-444): a TOML that gives no mode runs that, so it is priced
    exactly as the TOML that writes it out (full recompute, the reader's price of an integer option N > 1), not
    without recompute (round 17 found it priced so; it was said, then priced as the framework runs it)."""
    bare, written, none = (tmp_path / n for n in ("bare.toml", "written.toml", "none.toml"))
    bare.write_text(TITAN)
    written.write_text(TITAN + "[activation_checkpoint]\nmode = 'selective'\nselective_ac_option = '2'\n")
    none.write_text(TITAN + "[activation_checkpoint]\nmode = 'none'\n")
    got, want, off = (_predict(cli, p) for p in (bare, written, none))
    assert got["strategy"]["recompute"] == want["strategy"]["recompute"] == "full"
    assert got["step_time_s"] == want["step_time_s"] > off["step_time_s"]
    assert any("activation_checkpoint.mode not given" in u for u in got["inputs"]["strategy_file"]["unused"])


def test_torchtitan_layer_at_tp_above_1_prices_sequence_parallel_when_unset(cli) -> None:  # type: ignore[no-untyped-def]
    """torchtitan's TP plan is sequence-parallel (apply_tp: SequenceParallel norms and Shard(1) row-parallel outputs,
    torchtitan@e7c0cae; parallelism.enable_sequence_parallel defaults true @b5bcd76c66), as its TOML reader already
    reads it. A strategy naming layer_impl torchtitan at tp 2 without sequence_parallel was priced SP off (fuzz17's
    open question B): now priced as the explicit true, said once; a given false is kept."""
    base = ("predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--tp", "2",
            "--set", "strategy.layer_impl=torchtitan", "--json")
    unset, on, off = (cli(*base, *extra) for extra in (
        (), ("--set", "strategy.sequence_parallel=true"), ("--set", "strategy.sequence_parallel=false")))
    assert unset.code == on.code == off.code == 0
    got, want, without = (json.loads(r.out) for r in (unset, on, off))
    assert got["strategy"]["sequence_parallel"] is True and without["strategy"]["sequence_parallel"] is False
    assert got["step_time_s"] == want["step_time_s"] != without["step_time_s"]
    assert "strategy.sequence_parallel is unset: priced on, as torchtitan" in unset.err
    assert "sequence_parallel" not in on.err and "sequence_parallel" not in off.err
