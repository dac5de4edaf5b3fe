"""Round 31's words: memory's header names the cluster the other commands name (with the accelerator whose memory
it counts), and predict's prose throughput line labels its per-GPU figure as the tables do (tokens/s/GPU)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from test_cli_json import COMMANDS

from scalemodel.report.output import SCHEMA_VERSION


def test_memory_header_names_the_cluster_and_its_accelerator(cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", "200")
    r = cli("memory", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "64", "--tp", "8")
    assert r.code == 0, r.err
    # predict says "on 64 x dgx-a100"; memory said "on 64 x a100-sxm-80g", a name no option had given
    assert r.out.startswith("gpt3-175b on 64 x dgx-a100 (a100-sxm-80g): DP 8 x TP 8")


def test_predict_prose_labels_the_per_gpu_throughput(cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", "200")
    args = ("predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--pp", "8")
    r = cli(*args)
    assert r.code == 0, r.err
    m = re.search(r"throughput: ([\d,]+) tokens/s \(([\d,]+) tokens/s/GPU\), ", r.out)
    assert m, r.out
    total, per_gpu = (int(g.replace(",", "")) for g in m.groups())
    # the per-GPU figure is the total over the 1024 GPUs (each rounded to a whole token/s)
    assert abs(per_gpu - total / 1024) <= 1
    doc = json.loads(cli(*args, "--json").out)
    assert round(doc["throughput"]["tokens_per_s"]) == total


# --- the --json contract: schema_version is MAJOR.MINOR (docs/api.md#json-contract) --------------------------------

CONTRACT = Path(__file__).parent / "data" / "json_contract.json"


def key_paths(node: Any, prefix: str = "") -> set[str]:
    """Every key path of a document: 'a.b' for a dict's key, 'a[].b' for the keys of a list's dicts."""
    paths: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            paths.add(path)
            paths |= key_paths(value, path)
    elif isinstance(node, list):
        for item in node:
            paths |= key_paths(item, f"{prefix}[]")
    return paths


def _documents(run: Callable[..., Any]) -> dict[str, set[str]]:
    return {f"{command} {i}": key_paths(json.loads(run(*args, "--json").out))
            for i, (command, *args) in enumerate(COMMANDS)}


def test_json_keys_are_removed_or_renamed_only_with_a_major_version(cli) -> None:  # type: ignore[no-untyped-def]
    """A consumer reads keys by name: one that disappears (renamed, removed) breaks it, so it needs schema_version's
    MAJOR to move (scale's statistical_efficiency -> batch_efficiency in ux21 and stragglers' efficiency ->
    statistical_efficiency in fix30 moved none: 2.0 says so). Added keys are compatible. The recorded key paths
    are the contract (written by `python tests/test_ux31.py`, only with a MAJOR bump or an addition)."""
    recorded = json.loads(CONTRACT.read_text())
    now = _documents(cli)
    assert recorded["schema_version"].split(".")[0] == SCHEMA_VERSION.split(".")[0], (
        "schema_version's MAJOR moved: rewrite the contract (python tests/test_ux31.py)")
    for name, paths in recorded["documents"].items():
        gone = sorted(set(paths) - now[name])
        assert not gone, f"{name}: keys gone under schema_version {SCHEMA_VERSION} (bump MAJOR): {gone[:10]}"


if __name__ == "__main__":  # record the contract (an addition, or a MAJOR bump)
    import subprocess
    import sys

    class _Out:
        def __init__(self, *args: str) -> None:
            self.out = subprocess.run([sys.executable, "-m", "scalemodel", *args], capture_output=True, text=True,
                                      check=True).stdout

    docs = _documents(_Out)
    CONTRACT.write_text(json.dumps({"schema_version": SCHEMA_VERSION,
                                    "documents": {k: sorted(v) for k, v in docs.items()}}, indent=1) + "\n")
