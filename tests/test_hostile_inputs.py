"""Adversarial corpus: hostile, huge and malformed input for every command that reads input.

Every case asserts the CLI contract for bad input: exit status 2, exactly one line on stderr and it
starts with ``error: ``, no traceback, nothing on stdout (under ``--json`` too: an error is not a
result), every input file byte-identical afterwards, and no hang (a SIGALRM guard fails a case that
blocks, e.g. on a FIFO). The inputs are generated here (no fixtures on disk), hypothesis fuzzes spec
text and ``--set`` values, and the corpus runs in-process well under a minute.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from conftest import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

LOG = ROOT / "tests" / "data" / "nccl" / "synthetic_current.log"
BIG = "9" * 5000  # over Python's 4300-digit int-string limit

CLUSTER = """kind: cluster
name: hostile-cluster
accelerator: h100-sxm
gpus_per_node: 8
max_gpus: 64
tiers:
  - {name: nvlink, span: 8, bandwidth: 450 GB/s, latency: 2 us, efficiency: 0.8}
  - {name: ib, span: 64, bandwidth: 50 GB/s, latency: 5 us, efficiency: 0.9}
"""
WORKLOAD = """kind: transformer
name: hostile-model
layers: 4
hidden: 512
heads: 8
vocab: 1000
seq_len: 256
"""
SCENARIO = """kind: scenario
name: hostile-scenario
cluster: dgx-h100
model: gpt-1.7b
gpus: [16, 32]
training: {micro_batch: 1, global_batch: 64}
assertions: {max_step_time: 100s}
"""


#: A case that computes for this long is hung (CPU seconds of this process: a loaded machine, e.g. pytest-xdist
#: workers sharing its cores, does not stretch it), and one blocked this long in wall time (a read or a child process
#: that never returns, which burns no CPU here).
HANG_CPU_S, HANG_WALL_S = 20, 120


@contextlib.contextmanager
def _hang_guard(cpu_s: float, wall_s: int) -> Iterator[None]:
    """Raise TimeoutError in the block after ``cpu_s`` CPU seconds of this process or ``wall_s`` s of wall time."""
    def boom(signum, frame):  # type: ignore[no-untyped-def]
        raise TimeoutError(f"hostile input case hung ({cpu_s:g} s of CPU or {wall_s} s of wall time)")

    old_prof, old_alarm = signal.signal(signal.SIGPROF, boom), signal.signal(signal.SIGALRM, boom)
    signal.setitimer(signal.ITIMER_PROF, cpu_s)
    signal.alarm(wall_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.alarm(0)
        signal.signal(signal.SIGPROF, old_prof)
        signal.signal(signal.SIGALRM, old_alarm)


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    """Fail (instead of blocking the suite) when a case computes for 20 CPU seconds or blocks for 120 s."""
    with _hang_guard(HANG_CPU_S, HANG_WALL_S):
        yield


def test_the_hang_guard_fires_on_cpu_time_and_on_wall_time() -> None:
    """The guard itself: a busy loop is stopped by its CPU budget, a blocked call by its wall-clock backstop."""
    start = time.process_time()
    with pytest.raises(TimeoutError, match="hung"), _hang_guard(0.2, 30):
        while time.process_time() - start < 10:
            pass
    assert time.process_time() - start < 5
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="hung"), _hang_guard(30, 1):
        time.sleep(10)
    assert time.monotonic() - t0 < 5


def _snapshot(paths: list[Path]) -> dict[Path, bytes | None]:
    out: dict[Path, bytes | None] = {}
    for p in paths:
        try:
            out[p] = p.read_bytes() if p.is_file() and p.stat().st_size < 2**20 else None
        except OSError:
            out[p] = None
    return out


def refused(cli, *args: str, inputs: tuple[Path, ...] = (), match: str = ""):  # type: ignore[no-untyped-def]
    """Run the CLI and assert the bad-input contract; returns the error line."""
    before = _snapshot(list(inputs))
    r = cli(*args)
    assert "Traceback" not in r.err, r.err
    lines = r.err.strip().splitlines()
    assert r.code == 2, (r.code, r.out[-500:], r.err[-500:])
    assert len(lines) == 1 and lines[0].startswith("error: "), r.err
    assert r.out == "", r.out[:500]  # an error is not a result: nothing on stdout, --json included
    for p, data in before.items():
        if data is not None:
            assert p.read_bytes() == data, f"{p} was changed"
    if match:
        assert match in lines[0], lines[0]
    return lines[0]


def accepted(cli, *args: str) -> dict:  # type: ignore[type-arg, no-untyped-def]
    r = cli(*args, "--json")
    assert r.code == 0, r.err
    assert "Traceback" not in r.err
    return json.loads(r.out)  # type: ignore[no-any-return]


#: predict's cluster/model/GPU arguments and a Megatron-LM launch line that the rounds' reader tests extend
MEG_BASE = ["-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64"]
MEG_LAUNCH = "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1 --bf16 "


def megatron_launch(tmp_path: Path, flags: str) -> Path:
    """A Megatron-LM launch script of :data:`MEG_LAUNCH` with ``flags`` appended."""
    f = tmp_path / "run.sh"
    f.write_text(MEG_LAUNCH + flags + "\n")
    return f


# --- files that are not what they claim to be --------------------------------------------------------

def _bad_file(kind: str, tmp: Path, suffix: str) -> Path:
    p = tmp / f"bad-{kind}{suffix}"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "dev-zero":
        os.symlink("/dev/zero", p)
    elif kind == "dev-urandom":
        os.symlink("/dev/urandom", p)
    elif kind == "directory":
        p.mkdir()
    elif kind == "sparse-8GiB":
        with open(p, "wb") as f:
            f.truncate(8 * 2**30)
    elif kind == "not-utf8":
        p.write_bytes(b"kind: cluster\nname: \xff\xfe\x00\x81\n")
    elif kind == "nul-byte":
        p.write_bytes(b"kind: cluster\x00\nname: x\n")
    elif kind == "control-char":
        p.write_bytes(b"kind: cluster\nname: a\x1b[31mred\n")
    elif kind == "missing":
        pass
    elif kind == "unreadable":
        p.write_text("kind: cluster\n")
        p.chmod(0)
    else:  # pragma: no cover
        raise AssertionError(kind)
    return p


BAD_FILES = ["fifo", "dev-zero", "dev-urandom", "directory", "sparse-8GiB", "not-utf8", "nul-byte", "control-char",
             "missing"]

# command line templates; {f} is the hostile file
READERS: dict[str, tuple[str, list[str]]] = {
    "hardware validate": (".yaml", ["hardware", "validate", "{f}"]),
    "hardware show": (".yaml", ["hardware", "show", "{f}", "--json"]),
    "predict --cluster": (".yaml", ["predict", "-c", "{f}", "-m", "gpt-1.7b", "-n", "8", "--json"]),
    "predict --model": (".yaml", ["predict", "-c", "dgx-h100", "-m", "{f}", "-n", "8", "--json"]),
    "memory --model json": (".json", ["memory", "-c", "dgx-h100", "-m", "{f}", "-n", "8", "--json"]),
    "scale --scenario": (".yaml", ["scale", "--scenario", "{f}", "--json"]),
    "plan --cluster": (".yaml", ["plan", "-c", "{f}", "-m", "gpt-1.7b", "-n", "8", "--json"]),
    "check": (".yaml", ["check", "{f}", "--json"]),
    "collective --cluster": (".yaml", ["collective", "-c", "{f}", "--gpus", "8", "--size", "1MiB", "--json"]),
    "sensitivity --model": (".yaml", ["sensitivity", "-c", "dgx-h100", "-m", "{f}", "-n", "8", "--json"]),
    "calibrate LOG": (".log", ["calibrate", "{f}", "-c", "dgx-a100", "--json"]),
    "calibrate --cluster": (".yaml", ["calibrate", str(LOG), "-c", "{f}", "--json"]),
    "stragglers --samples": (".txt", ["stragglers", "-n", "64", "--samples", "{f}", "--json"]),
    "predict --strategy json": (".json", ["predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy", "{f}",
                                          "--json"]),
    "predict --strategy toml": (".toml", ["predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy", "{f}",
                                          "--json"]),
    "plan --strategy sh": (".sh", ["plan", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy", "{f}",
                                   "--json"]),
}


@pytest.mark.parametrize("kind", BAD_FILES)
@pytest.mark.parametrize("reader", list(READERS))
def test_bad_files_are_refused_without_reading(cli, tmp_path: Path, reader: str, kind: str) -> None:  # type: ignore[no-untyped-def]
    suffix, template = READERS[reader]
    if kind in ("not-utf8", "nul-byte", "control-char") and reader == "calibrate LOG":
        pytest.skip("nccl-tests logs are read leniently: junk bytes are not data rows (see test below)")
    f = _bad_file(kind, tmp_path, suffix)
    t0 = time.perf_counter()
    line = refused(cli, *[a.format(f=f) for a in template], inputs=(LOG,))
    assert time.perf_counter() - t0 < 10
    if kind in ("fifo", "dev-zero", "dev-urandom", "directory"):
        assert "not a regular file" in line
    if kind == "sparse-8GiB":
        assert "limit" in line and ("KiB" in line or "MiB" in line)


def test_unreadable_file(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    f = _bad_file("unreadable", tmp_path, ".yaml")
    refused(cli, "hardware", "validate", str(f), match="Permission denied")


def test_junk_log_has_no_data_rows(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "junk.log"
    f.write_bytes(b"\x00\xff\xfe garbage\n\x1b[31m 1 2 3\n")
    refused(cli, "calibrate", str(f), "-c", "dgx-a100", "--json", inputs=(f,), match="no nccl-tests data rows")


# --- YAML: 1.1 surprises, duplicates, bombs, huge and deep documents -------------------------------

ALIAS_BOMB = "\n".join(["a: &a [x, x, x, x, x, x, x, x, x]"]
                       + [f"{c}: &{c} [{', '.join(['*' + p] * 9)}]"
                          for p, c in zip("abcdefgh", "bcdefghi", strict=True)])

YAML_CASES = {
    "duplicate key": (CLUSTER + "name: again\n", "duplicate key 'name' (first on line 2, again on line 9)"),
    "sexagesimal": (WORKLOAD.replace("layers: 4", "layers: 12:30"), "layers"),
    "yes is not a boolean": (CLUSTER + "variability: {cv: yes}\n", "cv"),
    "boolean as number": (WORKLOAD.replace("vocab: 1000", "vocab: true"), "boolean"),
    "5000-digit int": (WORKLOAD.replace("layers: 4", f"layers: {BIG}"), "5000 digits"),
    "53-digit max_gpus": (CLUSTER.replace("max_gpus: 64", "max_gpus: " + "9" * 53), "53 digits"),
    "29-digit max_gpus": (CLUSTER.replace("max_gpus: 64", "max_gpus: " + "9" * 29), "max_gpus"),
    "subnormal memory": ("kind: accelerator\nname: a\npeak_flops: {bf16: 1e15}\nmemory: 5e-324 GB\n"
                         "memory_bandwidth: 1 TB/s\n", "physical range"),
    "infinite float": (CLUSTER.replace("efficiency: 0.9", "efficiency: .inf"), "efficiency"),
    "nan": (CLUSTER.replace("efficiency: 0.9", "efficiency: .nan"), "efficiency"),
    "alias bomb": (ALIAS_BOMB + "\n" + CLUSTER, "nodes"),
    "recursive alias": ("a: &a [*a]\n" + CLUSTER, "alias"),
    "deep nesting": ("x: " + "[" * 5000 + "]" * 5000 + "\n", "nest"),
    "150k keys": ("".join(f"k{i}: {i}\n" for i in range(150_000)), "limit"),
    "20k keys in 256 KiB": ("".join(f"k{i}: {i}\n" for i in range(15_000)), "nodes"),
    "top level list": ("- 1\n- 2\n", "mapping"),
    "empty": ("", "empty"),
    "tabs and junk": ("kind: cluster\n\tname: [\n", "malformed YAML"),
    "heads do not divide hidden": (WORKLOAD.replace("hidden: 512", "hidden: 500"), "multiple of heads"),
    "first_dense beyond layers": (WORKLOAD + "moe: {experts: 8, top_k: 2, first_dense: 9}\n", "first_dense"),
}


@pytest.mark.parametrize("case", list(YAML_CASES))
def test_hostile_yaml_specs(cli, tmp_path: Path, case: str) -> None:  # type: ignore[no-untyped-def]
    text, match = YAML_CASES[case]
    f = tmp_path / "spec.yaml"
    f.write_text(text)
    is_workload = "kind: transformer" in text
    t0 = time.process_time()
    if is_workload:
        refused(cli, "memory", "-c", "dgx-h100", "-m", str(f), "-n", "8", "--json", inputs=(f,), match=match)
    else:
        refused(cli, "hardware", "validate", str(f), "--json", inputs=(f,), match=match)
    assert time.process_time() - t0 < 1.0, "a hostile spec must be parsed or refused within a second"


def test_worst_case_yaml_within_the_limit_is_fast(tmp_path: Path) -> None:
    """Just under the 256 KiB limit, the shapes that cost most per byte still finish within a second."""
    from scalemodel.errors import InputError
    from scalemodel.specs.files import MAX_SPEC_BYTES
    from scalemodel.specs.loader import read_document

    shapes = {
        "flat keys": "".join(f"k{i}: 1\n" for i in range(MAX_SPEC_BYTES // 8)),
        "flow list": "a: [" + ",".join("1" for _ in range(MAX_SPEC_BYTES // 3)) + "]\n",
        "aliases": "a: &a {x: 1}\nb: [" + ",".join("*a" for _ in range(MAX_SPEC_BYTES // 4)) + "]\n",
        "nesting": "a: " + "[" * 50 + "1" + "]" * 50 + "\n" + "b: [[[[1]]]]\n" * (MAX_SPEC_BYTES // 14),
        "long scalar": CLUSTER.replace("name: hostile-cluster", "name: " + "x" * (MAX_SPEC_BYTES - 400)),
    }
    for name, text in shapes.items():
        data = text.encode()[: MAX_SPEC_BYTES].decode(errors="ignore")
        f = tmp_path / f"{name.replace(' ', '-')}.yaml"
        f.write_text(data)
        t0 = time.process_time()
        try:
            read_document(f)
        except InputError:
            pass
        assert time.process_time() - t0 < 1.0, name


def test_scenario_and_capacity_files(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "cap.yaml"
    for text, match in [(SCENARIO + "gpus: [8]\n", "duplicate key 'gpus'"),
                        (SCENARIO.replace("gpus: [16, 32]", "gpus: [16, 100000]"), "more GPUs than the cluster has"),
                        (SCENARIO.replace("gpus: [16, 32]", f"gpus: '16,{BIG}'"), "GPU counts"),
                        (SCENARIO.replace("gpus: [16, 32]", "gpus: [16, true]"), "boolean"),
                        (SCENARIO.replace("dgx-h100", "x" * 5000), "unknown built-in cluster")]:
        f.write_text(text)
        refused(cli, "check", str(f), "--json", inputs=(f,), match=match)
        refused(cli, "scale", "--scenario", str(f), "--json", inputs=(f,))


def test_long_and_strange_builtin_names(cli) -> None:  # type: ignore[no-untyped-def]
    long = "x" * 5000
    refused(cli, "hardware", "show", long, "--json", match="5000 characters")
    refused(cli, "predict", "-c", long, "-m", "gpt-1.7b", "-n", "8", "--json", match="unknown built-in cluster")
    refused(cli, "predict", "-c", "dgx-h100", "-m", long, "-n", "8", "--json", match="unknown built-in workload")
    refused(cli, "predict", "-c", "../../etc/passwd", "-m", "gpt-1.7b", "-n", "8")
    refused(cli, "predict", "-c", "dgx\x00h100", "-m", "gpt-1.7b", "-n", "8")
    refused(cli, "hardware", "show", "/" + "y" * 300 + "/x.yaml")
    refused(cli, "schema", long)


# --- --set values and paths -------------------------------------------------------------------------

SET_CASES = {
    f"model.layers={BIG}": "5000 digits",
    "model.layers=12:30": "layers",
    "model.layers=yes": "layers",
    "model.layers=true": "boolean",
    "model.vocab=0x": "vocab",
    f"model.layers=[{ALIAS_BOMB.replace(chr(10), ', ')}]": "",
    "model.layers=&a [*a]": "alias",
    "cluster.max_gpus=" + "9" * 53: "digits",
    "cluster.max_gpus=99999999999": "max_gpus",
    "accelerator.memory=5e-324 GB": "physical range",
    "accelerator.memory=1e999 GB": "memory",
    "cluster.tiers.0.efficiency=.nan": "efficiency",
    "cluster.tiers.\u0663.span=8": "no item",
    "cluster.tiers.\u00b2.span=8": "no item",
    f"cluster.tiers.{BIG}.span=8": "no item",
    "cluster.gpus_per_node=\x00": "gpus_per_node",
    "model.name=" + "n" * 100_000: "characters",
    "model.layers={a: 1, a: 2}": "duplicate key",
    "nonsense.x=1": "known root",
    "model.=1": "",
    "model": "names no field of model",  # round 19: was "does not start with a known root", a root it starts with
    "training.global_batch=" + "8" * 40: "digits",
    "strategy.tp=1e300": "tp",
    "model." + "a." * 50_000 + "b=1": "parts",
}


@pytest.mark.parametrize("item", list(SET_CASES), ids=lambda s: s[:40])
@pytest.mark.parametrize("command", ["predict", "memory", "scale", "plan", "sensitivity"])
def test_hostile_set_values(cli, item: str, command: str) -> None:  # type: ignore[no-untyped-def]
    if command == "memory" and item.startswith(("training.", "strategy.")):
        pytest.skip("memory takes no training/strategy --set")
    gpus = "8" if command != "scale" else "8,16"
    t0 = time.process_time()
    line = refused(cli, command, "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", gpus, "--set", item, "--json")
    assert SET_CASES[item] in line
    assert time.process_time() - t0 < 2.0


@pytest.mark.parametrize("item", ["cluster.max_gpus=" + "9" * 53, f"cluster.tiers.0.span={BIG}",
                                  "cluster.tiers.0.latency=1e-30 s", "accelerator.peak_flops.bf16=true"])
def test_hostile_set_on_cluster_readers(cli, item: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "collective", "-c", "dgx-h100", "--gpus", "8", "--size", "1MiB", "--set", item, "--json")
    refused(cli, "calibrate", str(LOG), "-c", "dgx-a100", "--set", item, "--json", inputs=(LOG,))
    refused(cli, "hardware", "show", "dgx-h100", "--set", item.removeprefix("cluster."), "--json")


# --- command-line numbers ---------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", BIG],
    ["scale", "-c", "dgx-h100", "-m", "gpt-1.7b", "--gpus", f"8,{BIG}"],
    ["scale", "-c", "dgx-h100", "-m", "gpt-1.7b", "--gpus", "8,\u00b2"],
    ["collective", "-c", "dgx-h100", "--gpus", "8", "--size", f"{BIG}B"],
    ["stragglers", "-n", BIG],
    ["stragglers", "-n", "8", "--mean", "nan s"],
    ["calibrate", str(LOG), "-c", "dgx-a100", "--ranks", BIG],
    ["predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--sync", f"backup:{BIG}"],
    ["predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--schedule", f"interleaved:{BIG}"],
    ["predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--compression", "topk:1e-99999"],
    ["predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--dp-comm", f"ps:{BIG}"],
    ["predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--sync", "ssp:\u0663"],
])
def test_hostile_numbers_on_the_command_line(cli, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    refused(cli, *args, "--json")


# --- GPU counts beyond the cluster ------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["predict", "-m", "gpt-1.7b", "-n", "10000000"],
    ["memory", "-m", "llama2-7b", "-n", "10000000"],
    ["plan", "-m", "gpt-1.7b", "-n", "1048576"],
    ["sensitivity", "-m", "gpt-1.7b", "-n", "1048576"],
    ["scale", "-m", "gpt-1.7b", "--gpus", "128,1048576"],
])
def test_more_gpus_than_the_cluster_has(cli, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, *args, "-c", "dgx-h100", "--json")
    assert "more GPUs than the cluster has (dgx-h100 has at most 16384)" in line


# --- HuggingFace config.json -------------------------------------------------------------------------

HF_BASE = {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8,
           "num_key_value_heads": 8, "intermediate_size": 1024, "vocab_size": 1000, "max_position_embeddings": 256}
HF_CASES = {
    "heads do not divide hidden": ({"num_attention_heads": 7}, "num_attention_heads"),
    "more heads than hidden": ({"hidden_size": 4}, "num_attention_heads"),
    "max_position_embeddings 0": ({"max_position_embeddings": 0}, "max_position_embeddings"),
    "vocab true": ({"vocab_size": True}, "vocab_size"),
    "vocab string": ({"vocab_size": "1000"}, "vocab_size"),
    "layers float": ({"num_hidden_layers": 4.5}, "num_hidden_layers"),
    "negative hidden": ({"hidden_size": -512}, "hidden_size"),
    "kv heads do not divide": ({"num_key_value_heads": 3}, "num_key_value_heads"),
    "first_k_dense beyond layers": ({"n_routed_experts": 8, "num_experts_per_tok": 2, "first_k_dense_replace": 9},
                                    "first_k_dense_replace"),
    "top_k beyond experts": ({"num_local_experts": 4, "num_experts_per_tok": 8}, "num_experts_per_tok"),
    "tie is a string": ({"tie_word_embeddings": "yes"}, "tie_word_embeddings"),
    "missing layers": ({"num_hidden_layers": None}, "num_hidden_layers"),
}


@pytest.mark.parametrize("case", list(HF_CASES))
def test_hostile_hf_configs(cli, tmp_path: Path, case: str) -> None:  # type: ignore[no-untyped-def]
    change, match = HF_CASES[case]
    d = tmp_path / "m"
    d.mkdir()
    f = d / "config.json"
    f.write_text(json.dumps({**HF_BASE, **change}))
    refused(cli, "memory", "-c", "dgx-h100", "-m", str(f), "-n", "8", "--json", inputs=(f,), match=match)
    refused(cli, "predict", "-c", "dgx-h100", "-m", str(f), "-n", "8", "--json", inputs=(f,), match=match)


@pytest.mark.parametrize("text,match", [
    (json.dumps(HF_BASE)[:-1] + f', "x": {BIG}}}', "5000 digits"),
    (json.dumps(HF_BASE)[:-1] + ',\n"vocab_size": 5}', "duplicate key 'vocab_size' (lines 1 and 2)"),
    (json.dumps(HF_BASE)[:-1] + ', "x": NaN}', "NaN"),
    ("[" * 100_000 + "]" * 100_000, "JSON"),
    (json.dumps(HF_BASE)[:-10], "malformed JSON"),
])
def test_hostile_json_text(cli, tmp_path: Path, text: str, match: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "config.json"
    f.write_text(text)
    refused(cli, "memory", "-c", "dgx-h100", "-m", str(f), "-n", "8", "--json", inputs=(f,), match=match)


def test_valid_hf_config_still_loads(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    d = tmp_path / "ok"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**HF_BASE, "max_position_embeddings": None}))
    doc = accepted(cli, "memory", "-c", "dgx-h100", "-m", str(d / "config.json"), "-n", "8")
    assert doc["inputs"]["model"] == "ok"


# --- nccl-tests logs ----------------------------------------------------------------------------------

def _json_log(results: list[dict]) -> str:  # type: ignore[type-arg]
    return json.dumps({"config": {"test": "all_reduce"}, "devices": [{}] * 8, "results": results})


GOOD = {"size": 1048576, "count": 262144, "type": "float", "out_of_place": {"time": 50.0, "bus_bw": 39.2},
        "in_place": {"time": 49.0, "bus_bw": 40.1}}
LOG_CASES = {
    "json string time": (_json_log([GOOD, {**GOOD, "out_of_place": {"time": "fast"}}]), "time"),
    "json null size": (_json_log([GOOD, {**GOOD, "size": None}]), "size"),
    "json list bus_bw": (_json_log([GOOD, {**GOOD, "out_of_place": {"time": 1.0, "bus_bw": [1]}}]), "bus_bw"),
    "json in_place is a list": (_json_log([GOOD, {**GOOD, "in_place": [1, 2]}]), "in_place"),
    "json bool count": (_json_log([GOOD, {**GOOD, "count": True}]), "count"),
    "json huge count": (_json_log([GOOD])[:-3] + f', "count": {BIG}}}]}}', "5000 digits"),
    "json Infinity times": (_json_log([{**GOOD, "out_of_place": {"time": 1e999}}]).replace("Infinity", "Infinity"),
                            "Infinity"),
    "text all-infinite times": ("# all_reduce_perf\n" + "".join(
        f" {2**k} {2**k // 4} float sum -1 1e999 0 0 0 1e999 0 0 0\n" for k in range(10, 20)),
        "no data row can be fitted"),
    "text superscript size": (
        "# all_reduce_perf\n 1048576\u00b2 262144 float sum -1 50.0 20.9 39.2 0 49.0 21.4 40.1 0\n",
        "no data row can be fitted"),
    "text 5000-digit count": (f"# all_reduce_perf\n 1048576 {BIG} float sum -1 50.0 20.9 39.2 0 49.0 21.4 40.1 0\n",
                              "no data row can be fitted"),
    "one row": ("# all_reduce_perf\n 1048576 262144 float sum -1 50.0 20.9 39.2 0 49.0 21.4 40.1 0\n", "two rows"),
    "empty": ("", "no nccl-tests data rows"),
}


@pytest.mark.parametrize("case", list(LOG_CASES))
def test_hostile_nccl_logs(cli, tmp_path: Path, case: str) -> None:  # type: ignore[no-untyped-def]
    text, match = LOG_CASES[case]
    f = tmp_path / "a.log"
    f.write_text(text)
    refused(cli, "calibrate", str(f), "-c", "dgx-a100", "--ranks", "8", "--json", inputs=(f,), match=match)


# --- --samples files ----------------------------------------------------------------------------------

SAMPLE_CASES = {
    "5000 digits": (f"1.0\n{BIG}\n", "line 2"),
    "nan": ("1.0\nnan\n", "line 2"),
    "inf json": ("[1.0, Infinity]", "line 1"),
    "negative": ("[1.0, -2]", "item 2"),
    "boolean": ("- 1.0\n- true\n", "line 2"),
    "nested": ("- 1.0\n- [2.0]\n", "line 2"),
    "mapping": ("- 1.0\n- {a: 1}\n", "line 2"),
    "sexagesimal": ("- 1.0\n- 1:30\n", "line 2"),
    "alias bomb": ("- &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
        f"- &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdef", "bcdefg", strict=True)), "nodes"),
    "huge yaml list": ("".join("- 1.0\n" for _ in range(110_000)), "nodes"),
    "only comments": ("# nothing\n\n", "no step times"),
    "binary": ("\x00\x01\x02", "line 1"),
}


@pytest.mark.parametrize("case", list(SAMPLE_CASES))
def test_hostile_samples(cli, tmp_path: Path, case: str) -> None:  # type: ignore[no-untyped-def]
    text, match = SAMPLE_CASES[case]
    f = tmp_path / "steps.txt"
    f.write_text(text)
    refused(cli, "stragglers", "-n", "64", "--samples", str(f), "--json", inputs=(f,), match=match)


def test_samples_limit_is_checked_before_reading(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from scalemodel.specs.files import MAX_SAMPLES_BYTES

    f = tmp_path / "big.txt"
    with open(f, "wb") as fh:
        fh.truncate(MAX_SAMPLES_BYTES + 1)
    refused(cli, "stragglers", "-n", "64", "--samples", str(f), "--json", match="16 MiB")


# --- outputs: never over an input, never half-written ---------------------------------------------

@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "a.log").write_bytes(LOG.read_bytes())
    (tmp_path / "base.yaml").write_text(CLUSTER)
    (tmp_path / "c.yaml").write_text("extends: base.yaml\nname: derived\n")
    (tmp_path / "m.png").write_text(WORKLOAD)
    (tmp_path / "old.yaml").write_text("# the previous overlay\n")
    return tmp_path


def test_calibrate_never_writes_over_its_inputs(cli, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    log, c, base = workdir / "a.log", workdir / "c.yaml", workdir / "base.yaml"
    ins = (log, c, base)
    # the log itself: refused first as not a YAML name (calibrate --out writes YAML only); the inputs below are YAML
    refused(cli, "calibrate", str(log), "-c", "dgx-a100", "--out", str(log), "--json", inputs=ins,
            match="writes YAML only")
    refused(cli, "calibrate", str(log), "-c", str(c), "--out", str(c), "--json", inputs=ins, match="input")
    refused(cli, "calibrate", str(log), "-c", str(c), "--out", str(base), "--json", inputs=ins, match="input")
    os.link(log, workdir / "hard.log")
    refused(cli, "calibrate", str(log), "-c", "dgx-a100", "--out", str(workdir / "hard.log"), "--json", inputs=ins)
    os.symlink(log, workdir / "soft.yaml")
    refused(cli, "calibrate", str(log), "-c", "dgx-a100", "--out", str(workdir / "soft.yaml"), inputs=ins)


@pytest.mark.parametrize("out,match", [
    ("o.yaml/", "folder"), (".", "folder"), ("sub", "folder"), ("missing/o.yaml", "does not exist"),
    ("/dev/null", "not a regular file"), ("fifo.yaml", "not a regular file"), ("", "folder"),
])
def test_bad_output_paths(cli, workdir: Path, out: str, match: str) -> None:  # type: ignore[no-untyped-def]
    (workdir / "sub").mkdir()
    os.mkfifo(workdir / "fifo.yaml")
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        refused(cli, "calibrate", "a.log", "-c", "dgx-a100", "--out", out, "--json", inputs=(workdir / "a.log",),
                match=match)
        assert not (workdir / "o.yaml").exists()
    finally:
        os.chdir(cwd)


def test_plot_never_overwrites_the_model(cli, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("matplotlib")
    m = workdir / "m.png"
    refused(cli, "scale", "-m", str(m), "-c", "dgx-h100", "--gpus", "8,16", "--plot", str(m), "--json",
            inputs=(m,), match="input of this command")
    refused(cli, "scale", "-m", "gpt-1.7b", "-c", "dgx-h100", "--gpus", "8,16", "--plot", str(workdir) + "/",
            "--json", match="--plot")


def test_overlay_from_a_cluster_file_loads(cli, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    (workdir / "sub").mkdir()
    out = workdir / "sub" / "overlay.yaml"
    doc = accepted(cli, "calibrate", str(workdir / "a.log"), "-c", str(workdir / "c.yaml"), "--out", str(out))
    assert doc["inputs"]["out"] == str(out)
    assert "extends: ../c.yaml" in out.read_text()
    shown = accepted(cli, "hardware", "show", str(out))
    assert shown["spec"]["name"] == "derived-calibrated"
    assert shown["spec"]["max_gpus"] == 64  # from base.yaml, through c.yaml
    assert oct(out.stat().st_mode & 0o777) != oct(0o600)  # not the temporary file's private mode


def _interrupt_after_write(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)


def test_interrupted_write_leaves_the_old_file(monkeypatch: pytest.MonkeyPatch, workdir: Path) -> None:
    from scalemodel.report.output import write_file

    old = workdir / "old.yaml"
    before = old.read_bytes()
    _interrupt_after_write(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        write_file(old, "x" * 10_000_000, "--out")
    assert old.read_bytes() == before
    assert sorted(p.name for p in workdir.iterdir()) == ["a.log", "base.yaml", "c.yaml", "m.png", "old.yaml"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown a link")
def test_a_link_another_user_planted_in_a_sticky_folder_is_not_written_through(tmp_path: Path) -> None:
    """The kernel's protected_symlinks rule, which write_file's own resolve-and-rename would bypass."""
    from scalemodel.errors import InputError
    from scalemodel.report.output import write_file

    shared, victim = tmp_path / "shared", tmp_path / "victim.txt"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like /tmp: sticky, world-writable, owned by root
    victim.write_text("keep me")
    planted = shared / "out.json"
    os.symlink(victim, planted)
    os.lchown(planted, 12345, 12345)  # another user's link
    with pytest.raises(InputError, match="another user owns"):
        write_file(planted, "{}", "--out")
    assert victim.read_text() == "keep me"
    os.lchown(planted, 0, 0)  # the caller's own link is followed, as before
    write_file(planted, "{}", "--out")
    assert victim.read_text() == "{}" and planted.is_symlink()
    chained = shared / "chain.json"  # every link of a chain is checked
    os.symlink(planted, chained)
    os.lchown(planted, 12345, 12345)
    with pytest.raises(InputError, match="another user owns"):
        write_file(chained, "[]", "--out")
    assert victim.read_text() == "{}"
    plain = tmp_path / "plain"  # an ordinary folder: another user's link is followed (the kernel allows it)
    plain.mkdir()
    os.symlink(victim, plain / "o.json")
    os.lchown(plain / "o.json", 12345, 12345)
    write_file(plain / "o.json", "ok", "--out")
    assert victim.read_text() == "ok"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown a link")
def test_a_folder_link_another_user_planted_in_a_sticky_folder_is_not_written_through(tmp_path: Path) -> None:
    """found by review: the rule checked the last component only, so another user's link to a folder, planted in a
    shared sticky folder, was followed as a folder of the path (shared/x -> victim's folder: shared/x/out.json
    replaced the victim's out.json), which the kernel's protected_symlinks refuses as it refuses the file link."""
    from scalemodel.errors import InputError
    from scalemodel.report.output import write_file

    shared, victim_dir = tmp_path / "shared", tmp_path / "victim"
    shared.mkdir()
    victim_dir.mkdir()
    os.chmod(shared, 0o1777)
    (victim_dir / "out.json").write_text("keep me")
    os.symlink(victim_dir, shared / "x")
    os.lchown(shared / "x", 12345, 12345)
    with pytest.raises(InputError, match="another user owns"):
        write_file(shared / "x" / "out.json", "{}", "--out")
    with pytest.raises(InputError, match="another user owns"):
        write_file(shared / "x" / "new.json", "{}", "--out")
    assert (victim_dir / "out.json").read_text() == "keep me" and not (victim_dir / "new.json").exists()
    os.lchown(shared / "x", 0, 0)  # the caller's own folder link is followed
    write_file(shared / "x" / "out.json", "{}", "--out")
    assert (victim_dir / "out.json").read_text() == "{}"


def test_interrupted_plot_leaves_the_old_plot(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from scalemodel.report.plot import plot_scaling

    point = {"scaling_efficiency": 1.0, "loss_attribution": {"compute": 0.0}, "tokens_per_s": 1e5, "tflops_per_gpu": 50}
    payload = {"mode": "weak", "inputs": {}, "points": [{**point, "gpus": 8}, {**point, "gpus": 16}]}
    png = tmp_path / "curve.png"
    png.write_bytes(b"the previous plot")
    _interrupt_after_write(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        plot_scaling(payload, png)
    assert png.read_bytes() == b"the previous plot"
    assert [p.name for p in tmp_path.iterdir()] == ["curve.png"]


def test_interrupted_command_is_one_line_and_keeps_the_old_file(cli, workdir: Path,  # type: ignore[no-untyped-def]
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    old = workdir / "old.yaml"
    before = old.read_bytes()
    _interrupt_after_write(monkeypatch)
    r = cli("calibrate", str(workdir / "a.log"), "-c", "dgx-a100", "--out", str(old), "--json")
    assert r.code == 130 and r.out == "" and "Traceback" not in r.err
    assert r.err.count("\n") == 1 and r.err.startswith("error: interrupted")
    assert old.read_bytes() == before
    assert not [p for p in workdir.iterdir() if p.name.endswith(".tmp")]


def test_failed_write_is_one_error_line(cli, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    old = workdir / "old.yaml"
    refused(cli, "calibrate", str(workdir / "a.log"), "-c", "dgx-a100", "--out", str(old), "--json",
            inputs=(old, workdir / "a.log"), match="No space left")


# --- fuzzing -----------------------------------------------------------------------------------------

FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
_yamlish = hs.lists(hs.sampled_from(list("ab09:-[]{}&*!|>'\"#,. \n\t~%@`?") + [
    "\x00", "\x85", "\u2028", "\u0663", "\u00b2", "9" * 50, "kind: ", "tiers", "name", "1e999", ".nan", "true",
    "12:30", "0x1F", "0o17", "&a", "*a", "<<: ", "!!python/object:os.system", "GB", "us"]), max_size=40).map("".join)


@FUZZ
@given(text=_yamlish)
def test_fuzzed_spec_text_never_tracebacks(cli, tmp_path_factory: pytest.TempPathFactory, text: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path_factory.mktemp("fuzz") / "spec.yaml"
    f.write_text(CLUSTER + text, encoding="utf-8")
    before = f.read_bytes()
    r = cli("hardware", "validate", str(f), "--json")
    assert "Traceback" not in r.err
    assert r.code in (0, 2), r.err
    if r.code == 2:
        assert r.err.count("\n") == 1 and r.err.startswith("error: ") and r.out == ""
    else:
        json.loads(r.out)
    assert f.read_bytes() == before


@FUZZ
@given(path=hs.sampled_from(["model.layers", "model.hidden", "cluster.tiers.0.span", "cluster.tiers.ib-leaf.latency",
                            "accelerator.memory", "training.global_batch", "strategy.tp", "model.moe.top_k",
                            "cluster.variability.cv"]),
       value=_yamlish)
def test_fuzzed_set_values_never_traceback(cli, path: str, value: str) -> None:  # type: ignore[no-untyped-def]
    r = cli("memory", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--set", f"{path}={value}", "--json")
    assert "Traceback" not in r.err
    assert r.code in (0, 2), r.err
    if r.code == 2:
        assert r.err.count("\n") == 1 and r.err.startswith("error: ") and r.out == ""
    else:
        json.loads(r.out)


def test_corpus_helpers_cover_every_reading_command() -> None:
    """Every command that reads a file appears in READERS (a new reader needs hostile cases too)."""
    covered = {t[1][0] for t in READERS.values()}
    assert {"hardware", "predict", "memory", "scale", "plan", "check", "collective", "calibrate", "stragglers",
            "sensitivity"} <= covered



def test_references_inside_specs_are_read_the_same_way(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """extends:, a scenario's cluster:/model: and a cluster's accelerator: go through the same bounded reader."""
    os.mkfifo(tmp_path / "pipe.yaml")
    os.symlink("/dev/zero", tmp_path / "zero.yaml")
    for target in ("pipe.yaml", "zero.yaml"):
        spec = tmp_path / "spec.yaml"
        spec.write_text(f"kind: cluster\nextends: {target}\nname: x\n")
        refused(cli, "hardware", "validate", str(spec), match="not a regular file")
        spec.write_text(SCENARIO.replace("cluster: dgx-h100", f"cluster: {target}"))
        refused(cli, "check", str(spec), match="not a regular file")
        spec.write_text(CLUSTER.replace("accelerator: h100-sxm", f"accelerator: {tmp_path / target}"))
        refused(cli, "predict", "-c", str(spec), "-m", "gpt-1.7b", "-n", "8", match="not a regular file")


def test_read_io_error_is_one_line(cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import scalemodel.specs.files as files

    def eio(fd: int, n: int) -> bytes:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(files.os, "read", eio)
    refused(cli, "calibrate", str(LOG), "-c", "dgx-a100", "--json", match="Input/output error")
    refused(cli, "stragglers", "-n", "8", "--samples", str(LOG), "--json", match="Input/output error")
    refused(cli, "hardware", "show", "dgx-h100", "--json", match="Input/output error")


def test_permission_denied_is_one_line(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """As test_unreadable_file, for a run as root (which may read anything): os.open refuses."""
    import scalemodel.specs.files as files

    def denied(*args: object, **kwargs: object) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(files.os, "open", denied)
    refused(cli, "calibrate", str(LOG), "-c", "dgx-a100", "--json", match="Permission denied")
    refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--json", match="Permission denied")


# --- this round's inputs: moe_layer_host_s, recompute_modules, hier:G with HSDP, the precompiled catalog ---------

@pytest.mark.parametrize("item, match", [
    ("strategy.recompute_modules=,core_attn", "recompute_modules"),    # the regex took an empty first name
    ("strategy.recompute_modules=core_attn,", "recompute_modules"),
    ("strategy.recompute_modules=bogus", "strategy.recompute_modules: unknown recompute module 'bogus'"),
    ("strategy.moe_layer_host_s=.nan", "moe_layer_host_s"),
    ("strategy.moe_layer_host_s=1e300", "physical range"),
    ("strategy.moe_layer_host_s=-1 ms", "moe_layer_host_s"),
    ("strategy.moe_layer_host_s=9 GB", "unknown unit"),
    ("strategy.ep_dispatch_sms=-1", "ep_dispatch_sms"),
    ("strategy.ep_dispatch_sms=1.5", "ep_dispatch_sms"),
    ("strategy.ep_dispatch_sms=500", "exceeds the 132 compute units"),
])
def test_hostile_new_strategy_fields(cli, item: str, match: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", "dgx-h100", "-m", "mixtral-8x7b", "-n", "64", "--recompute", "selective",
            "--set", item, "--json", match=match)


def test_negative_zero_seconds_become_zero(cli) -> None:  # type: ignore[no-untyped-def]
    """``-0.0`` passes ``>= 0``; it must not reach the result as a negative zero (the echoed --set text aside)."""
    r = cli("predict", "-c", "dgx-h100", "-m", "mixtral-8x7b", "-n", "64", "--set", "strategy.moe_layer_host_s=-0.0",
            "--set", "strategy.dispatch_overhead=-0 ms", "--json")
    assert r.code == 0, r.err
    found: list[str] = []

    def walk(o: object, path: str) -> None:
        if isinstance(o, dict):
            for k, v in o.items():
                walk(v, f"{path}.{k}")
        elif isinstance(o, list):
            for i, v in enumerate(o):
                walk(v, f"{path}[{i}]")
        elif isinstance(o, float) and o == 0 and str(o).startswith("-"):
            found.append(path)

    walk(json.loads(r.out), "")
    assert not found, found


def test_stragglers_kappa_message_names_finiteness(cli) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "stragglers", "-n", "64", "--optimizer", "sgd", "--staleness-kappa", "inf", "--json")
    assert "finite" in line  # was "must be >= 0, got inf": inf is >= 0


def test_plan_refuses_a_shard_group_that_hier_overrides(cli) -> None:  # type: ignore[no-untyped-def]
    """predict refuses zero hsdp + shard_group 2 under hier:8 (the hier group is the shard group); plan ranked it."""
    args = ["-c", "dgx-h100", "-m", "llama2-7b", "-n", "64", "--set", "strategy.sync=hier:8", "--set",
            "strategy.shard_group=2"]
    refused(cli, "predict", *args, "--zero", "hsdp", "--json", match="shard_group")
    refused(cli, "plan", *args, "--set", "strategy.zero=hsdp", "--json", match="shard_group = 2")
    refused(cli, "plan", *args, "--json", match="shard_group = 2")  # zero searched: hsdp among the candidates
    out = accepted(cli, "plan", *args, "--set", "strategy.zero=1")  # another stage ignores shard_group, as predict
    assert out["ranked"]


def test_plan_never_ranks_hsdp_with_another_group_under_hier(cli) -> None:  # type: ignore[no-untyped-def]
    """With hier:8 searched (--sync-modes, not pinned) the evaluation marks hsdp + shard_group 2 infeasible: plan
    ranked exactly that strategy (priced as shard group 8), which predict refuses."""
    out = accepted(cli, "plan", "-c", "dgx-h100", "-m", "llama2-7b", "-n", "64", "--sync-modes", "hier:8", "--set",
                   "strategy.zero=hsdp", "--set", "strategy.shard_group=2")
    assert not [p for p in out["ranked"] if p["strategy"]["sync"] == "hier:8" and p["strategy"]["zero"] == "hsdp"
                and p["strategy"].get("shard_group") == 2]


@pytest.mark.parametrize("damage", ["missing", "truncated", "not json", "wrong layout", "nested", "number out of range",
                                    "directory"])
def test_damaged_precompiled_catalog_falls_back_to_yaml(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        damage: str) -> None:  # type: ignore[no-untyped-def]
    """scalemodel/data/catalog.json missing or damaged: every built-in file is parsed from its YAML, no traceback."""
    import scalemodel.specs.precompiled as precompiled

    real = Path(precompiled.DATA).read_bytes()
    doc = json.loads(real)
    target = tmp_path / "catalog.json"
    if damage == "truncated":
        target.write_bytes(real[: len(real) // 2])
    elif damage == "not json":
        target.write_bytes(b"\x00\xffnot json")
    elif damage == "wrong layout":
        target.write_bytes(b'{"source": 1, "documents": []}')
    elif damage == "nested":
        target.write_bytes(b"[" * 100_000)
    elif damage == "number out of range":  # valid JSON that msgspec cannot decode into a float: was a traceback
        key = next(k for k in doc["documents"] if k.startswith("dgx-h100.yaml:"))
        doc["documents"][key][1] = {"kind": "cluster", "name": "dgx-h100", "gpus_per_node": 0}
        target.write_text(json.dumps(doc).replace('"gpus_per_node": 0', '"gpus_per_node": 1e999'))
    elif damage == "directory":
        target.mkdir()
    monkeypatch.setattr(precompiled, "DATA", target)
    monkeypatch.setattr(precompiled, "_documents", None)
    out = accepted(cli, "predict", "-c", "dgx-h100", "-m", "llama2-7b", "-n", "64")
    monkeypatch.setattr(precompiled, "DATA", tmp_path / "absent.json")
    monkeypatch.setattr(precompiled, "_documents", None)
    again = accepted(cli, "predict", "-c", "dgx-h100", "-m", "llama2-7b", "-n", "64")
    assert again["step_time_s"] == out["step_time_s"]


def test_catalog_document_failing_validation_is_one_line(cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import scalemodel.specs.precompiled as precompiled

    doc = json.loads(Path(precompiled.DATA).read_bytes())
    key = next(k for k in doc["documents"] if k.startswith("dgx-h100.yaml:"))
    entry = {"kind": "cluster", "name": "dgx-h100"}  # with its own checksum: a wrong build, not later damage
    doc["documents"][key] = [precompiled.checksum(msgspec.json.encode(entry)), entry]
    target = tmp_path / "catalog.json"
    target.write_text(json.dumps(doc))
    monkeypatch.setattr(precompiled, "DATA", target)
    monkeypatch.setattr(precompiled, "_documents", None)
    refused(cli, "predict", "-c", "dgx-h100", "-m", "llama2-7b", "-n", "64", "--json", match="dgx-h100.yaml")


def test_moe_and_mla_fields_on_a_model_without_them_warn(cli) -> None:  # type: ignore[no-untyped-def]
    """moe_layer_host_s / recompute_modules moe_act, mla_up_proj on a dense GPT are not silently ignored."""
    out = accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--recompute", "selective", "--set",
                   "strategy.moe_layer_host_s=1", "--set", "strategy.recompute_modules=moe_act,mla_up_proj",
                   "--set", "strategy.ep_dispatch_sms=32")
    text = " ".join(out["warnings"])
    assert "ep_dispatch_sms" in text
    assert "moe_layer_host_s" in text and "moe_act" in text and "mla_up_proj" in text
    moe = accepted(cli, "predict", "-c", "dgx-h100", "-m", "mixtral-8x7b", "-n", "64", "--ep", "8", "--recompute",
                   "selective", "--set", "strategy.moe_layer_host_s=9 ms",
                   "--set", "strategy.recompute_modules=moe_act")
    assert not [w for w in moe["warnings"] if "moe_layer_host_s" in w or "moe_act" in w]
