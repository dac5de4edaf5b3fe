"""Round 31's speed changes keep what they replace: the collector set only by the program's entry
(scalemodel/__main__.py), the NVLink search walk's early exits, the hybrid-rank keys without fractions."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from scalemodel.cost.nccl import NCCL_INTER_SPEEDS, _nvlink_search_walk
from scalemodel.engine.pipeline_ranks import _share

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_importing_the_cli_leaves_the_collector_as_it_was():
    """A library user's or a test's import of scalemodel.cli sets nothing: collector on, nothing frozen."""
    assert _run("import gc, scalemodel.cli\nprint(gc.isenabled(), gc.get_freeze_count())").split() == ["True", "0"]


def test_the_entry_freezes_what_the_imports_made_and_runs_the_command_with_the_collector_on():
    """Fails before round 31 (nothing frozen): the entry module, as python -m and the console script load it."""
    out = _run("import gc, scalemodel.__main__\nprint(gc.isenabled(), gc.get_freeze_count() > 1000)")
    assert out.split() == ["True", "True"]


def test_the_entry_leaves_a_disabled_collector_disabled():
    assert _run("import gc\ngc.disable()\nimport scalemodel.__main__\nprint(gc.isenabled())").split() == ["False"]


def test_python_m_scalemodel_runs_the_command_with_the_collector_on():
    """The command itself runs with the collector on: a query's cycles are collected (gc.callbacks sees one)."""
    code = ("import gc, runpy, sys\nseen = []\ngc.callbacks.append(lambda phase, info: seen.append(phase))\n"
            "sys.argv = ['scalemodel', 'collective', '-c', 'dgx-a100', '-n', '64', '--json']\n"
            "try:\n    runpy.run_module('scalemodel', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print(gc.isenabled(), 'start' in seen)")
    assert _run(code).split()[-2:] == ["True", "True"]


def test_the_console_script_enters_through_the_entry_module():
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^scalemodel = "scalemodel\.__main__:main"$', text, re.M)


def _walk_by_hand(gbs: float, nics: float, c0: float, total: float, speeds: tuple[float, ...]) -> tuple[float, float]:
    """The walk of NCCL's search (nccl.py's _nvlink_search_walk docstring; search.cc:1164-1252) for one group, in plain
    Python: from the fastest speed not above the NIC, every speed until the walk stops."""
    best_n, best_s, started = 0.0, 0.0, False
    for v in speeds:
        if v > gbs * (1 + 1e-9):
            continue
        if started and best_n > 0 and not v / best_s > 0.49:
            break
        started = True
        held = np.floor(c0 * np.floor(total / v + 1e-9) / (c0 - 1.0) + 1e-9) if c0 > 1.5 else np.inf
        ch = min(32.0, nics * np.floor(gbs / v + 1e-9), held)
        if ch * v > best_n * best_s * (1 + 1e-12):
            best_n, best_s = ch, v
        if best_n * best_s >= total * (1 - 1e-12):
            break
    return best_n, best_s


def test_the_walk_on_the_docstrings_examples():
    """8 H100 (NCCL's NVLink 370.8 GB/s) with a 400 Gb/s NIC each: 8 channels of 48 GB/s (8 x 48 >= 370.8); with
    800 Gb/s NICs the NICs would take 16, the NVLink holds 8 (floor(8 x 7 / 7))."""
    hopper = NCCL_INTER_SPEEDS["hopper"]
    n, s = _nvlink_search_walk(np.array([50.0, 100.0]), np.array([8.0, 8.0]), np.array([8.0, 8.0]), 370.8, hopper,
                               np.array([np.nan, np.nan]), np.array([0.0, 0.0]))
    assert n.tolist() == [8.0, 8.0] and s.tolist() == [48.0, 48.0]


def test_the_walk_matches_the_walk_by_hand_on_every_mix_of_groups():
    """The early exits (speeds no finite NIC reaches skipped, the loop left once no group walks) change no element:
    each group of a mixed batch, NaN / inf NICs (no outer tier: n0, s0) among them, is the walk by hand."""
    for family, speeds in NCCL_INTER_SPEEDS.items():
        nic_gbs = [0.1, 3.125, 12.5, 25.0, 50.0, 100.0, 200.0, np.inf, np.nan]
        combos = list(itertools.product(nic_gbs, [1.0, 4.0, 8.0], [1.0, 2.0, 8.0, 72.0]))
        gbs, nics, c0 = (np.array(col) for col in zip(*combos, strict=True))
        for total in (160.0, 370.8, 721.8):
            n0, s0 = np.full(gbs.shape, -1.0), np.full(gbs.shape, -2.0)
            n, s = _nvlink_search_walk(gbs, nics, c0, total, speeds, n0, s0)
            for i, (g, k, c) in enumerate(combos):
                want = _walk_by_hand(g, k, c, total, speeds) if np.isfinite(g) else (0.0, 0.0)
                if want[0] == 0:
                    want = (-1.0, -2.0)
                assert (n[i], s[i]) == want, (family, total, combos[i])


@pytest.mark.parametrize("of", [1, 2, 3, 4, 6, 7, 12, 61])
def test_share_keys_are_equal_exactly_where_the_fractions_are(of):
    """pipeline_ranks' hybrid-rank keys: two shares are one key exactly where Fraction makes them equal."""
    pairs = [(c, n) for n in range(1, of + 1) for c in range(0, n + 1)]
    for a, b in itertools.product(pairs, repeat=2):
        assert (_share(*a) == _share(*b)) == (Fraction(*a) == Fraction(*b))
