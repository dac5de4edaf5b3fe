"""Hostile-input round 24: the fields of round 23 (nics_per_node, full_mesh, collective_units, the torchtitan_eager /
fms layer implementations, rotary false and learned position tables, fsdp_reshard_after_forward, the FP8 / NVFP4
recipe fields), the torchtitan / Megatron-LM readers, every command's numeric options and units, the environment
variables the command line reads, sweep and study products, and the Python API with NumPy / pandas values.

Each case is one finding of a corpus run one process per case (timeout and memory cap, sequentially, under /tmp);
the CLI contract is test_hostile_inputs.py's, the API's docs/api.md's (bad values raise InputError naming the
argument).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_hostile_inputs import MEG_BASE, accepted, megatron_launch, no_hang, refused  # noqa: F401 (no_hang: autouse)

import scalemodel
from scalemodel.engine.grid import run_grid
from scalemodel.errors import InputError
from scalemodel.specs.sweep import load_sweep

# --- a learned position table shorter than the sequence -------------------------------------------------------------
# gpt-1.7b's learned table has 2048 rows (position_embeddings); --seq-len 8192 was priced as if positions 2048-8191
# had embeddings. Megatron-LM's validate_args asserts max_position_embeddings >= seq_length, and HF's GPT-2 / OPT
# index their table past its end.


@pytest.mark.parametrize("args, said", [
    (["--seq-len", "8192"], "error: --seq-len: 8192 is longer than the model's learned position table of 2048 rows"),
    (["--set", "training.seq_len=4096"], "error: --set training.seq_len: 4096 is longer than the model's learned"),
    (["--set", "model.seq_len=4096"], "error: --set model.seq_len: 4096 is longer than the learned position table"),
    (["--set", "model.position_embeddings=1024"], "error: --set model.position_embeddings: seq_len: 2048 is longer"),
], ids=["seq-len", "training", "model-seq", "model-table"])
@pytest.mark.parametrize("command", ["predict", "memory", "plan"])
def test_a_sequence_longer_than_the_learned_position_table_is_refused(cli, command: str, args: list[str],
                                                                       said: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, command, "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", *args)
    assert line.startswith(said), line
    assert "; " in line


def test_a_learned_table_as_long_as_the_sequence_still_runs(cli) -> None:  # type: ignore[no-untyped-def]
    doc = accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--seq-len", "2048")
    assert doc["step_time_s"] > 0
    longer = accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--seq-len", "4096",
                      "--set", "model.position_embeddings=4096")
    assert longer["step_time_s"] > doc["step_time_s"]


def test_api_sequence_longer_than_the_learned_table_is_refused() -> None:
    with pytest.raises(InputError) as exc:
        scalemodel.predict("dgx-h100", "gpt-1.7b", 8, seq_len=4096)
    assert "learned position table of 2048 rows" in str(exc.value) and "; " in str(exc.value)


def test_a_workload_file_with_a_short_table_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "m.yaml"
    f.write_text("kind: transformer\nname: m\nlayers: 4\nhidden: 512\nheads: 8\nvocab: 1000\nseq_len: 1024\n"
                 "position_embeddings: 512\n")
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", str(f), "-n", "8", inputs=(f,))
    assert "seq_len: 1024 is longer than the learned position table of 512 rows" in line, line


# --- Megatron-LM's --fp8-recipe without its value ---------------------------------------------------------------------
# argparse refuses "--fp8-recipe" followed by nothing or by another flag ("expected one argument"); the reader dropped
# it without a word (priced delayed scaling beside --fp8-format, said nothing without it), where --fp4-recipe and
# --fp8-format without a value were refused.

@pytest.mark.parametrize("flags", ["--fp8-recipe", "--fp8-format hybrid --fp8-recipe",
                                   "--fp8-recipe --fp8-format hybrid"])
def test_megatron_fp8_recipe_without_a_value_is_refused(cli, tmp_path: Path, flags: str) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, flags)
    refused(cli, "predict", *MEG_BASE, "--strategy", str(f), inputs=(f,),
            match="--fp8-recipe: unknown fp8 recipe: no value; a recipe name after the flag")


def test_megatron_fp8_recipe_with_a_value_still_reads(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, "--fp8-format hybrid --fp8-recipe tensorwise")
    doc = accepted(cli, "predict", *MEG_BASE, "--strategy", str(f))
    assert doc["inputs"]["strategy_file"]["training"]["fp8_recipe"] == "tensorwise"


# --- a framework default refused for an option given beside the file ------------------------------------------------
# A torchtitan TOML shards with FSDP2 (the reader fills strategy.fsdp_per_param true, torchtitan's default); --zero 3
# beside it was refused as "--strategy: t.toml: strategy.fsdp_per_param: true needs PyTorch FSDP2", a field the file
# never wrote, with nothing to say where the true came from.

TITAN = Path(__file__).resolve().parent / "data" / "frameworks" / "torchtitan_llama3_8b.toml"


@pytest.mark.parametrize("zero", [["--zero", "3"], ["--set", "strategy.zero=1"]])
def test_a_framework_default_refused_for_an_option_says_it_is_the_default(cli, zero: list[str]) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--strategy", str(TITAN), *zero,
                   inputs=(TITAN,))
    assert "strategy.fsdp_per_param: true needs PyTorch FSDP2" in line, line
    assert "where fsdp_per_param is torchtitan's own default (the file does not write it); " in line, line


def test_a_field_the_file_writes_is_not_called_a_default(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("fsdp_per_param: true\n")
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--strategy", str(f),
                   "--zero", "3", inputs=(f,))
    # since fuzz37 a file that does not write zero is judged with --zero (commands.common.validate_written), which
    # names the key as the file writes it (top-level fsdp_per_param) after the option that decides it
    assert line.startswith(f"error: --zero: --strategy: {f}: fsdp_per_param: true needs PyTorch FSDP2"), line
    assert "(got zero '3')" in line and "own default" not in line, line


# --- --staleness-kappa below 0 --------------------------------------------------------------------------------------
# predict / scale / sensitivity read it with an argparse type that said "argument --staleness-kappa: -1 is not >= 0;
# see `scalemodel predict --help`" (and "nan is not >= 0"), where inf, 1e308 and stragglers' option got the range;
# the one check (check_kappa) now says it for every value.

@pytest.mark.parametrize("value", ["-1", "nan", "-inf", "inf"])
@pytest.mark.parametrize("command", ["predict", "scale"])
def test_staleness_kappa_out_of_range_gives_the_range(cli, command: str, value: str) -> None:  # type: ignore[no-untyped-def]
    gpus = "8,16" if command == "scale" else "8"
    refused(cli, command, "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", gpus, "--sync", "ssp:2",
            f"--staleness-kappa={value}",
            match=f"error: --staleness-kappa: --staleness-kappa must be a finite number from 0 to 1e+06, got {value}; "
                  "a number from 0 to 1e+06")


def test_staleness_kappa_in_range_still_runs(cli) -> None:  # type: ignore[no-untyped-def]
    doc = accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--sync", "ssp:2",
                   "--staleness-kappa", "0")
    assert doc["step_time_s"] > 0


# --- units: a count's range and an accelerator's memory below its reserve -------------------------------------------
# "--train-tokens '1e-30 B'" said "1e-21  is outside the physical range 1 .. 1e+30" (a blank where a count has no
# unit); --set accelerator.memory=1.5B was refused at the built-in file's line ("hardware/clusters/dgx-h100.yaml:6:
# accelerator.memory_reserved: ...") though the --set item made the conflict.

@pytest.mark.parametrize("option", ["--train-tokens", "--critical-batch"])
def test_a_count_outside_its_range_is_said_without_a_blank_unit(cli, option: str) -> None:  # type: ignore[no-untyped-def]
    command = "scale" if option == "--critical-batch" else "predict"
    line = refused(cli, command, "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", option, "1e-30 B")
    assert f"error: {option}: 1e-21 is outside the physical range 1 .. 1e+30; " in line, line


@pytest.mark.parametrize("item", ["accelerator.memory=1.5B", "cluster.accelerator.memory=100MB"])
def test_memory_below_the_reserve_is_refused_at_the_set_item(cli, item: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--set", item)
    assert line.startswith(f"error: --set {item.split('=')[0]}: accelerator.memory_reserved: 475332608 B is not less "
                           "than memory"), line


# --- COLUMNS the console cannot print in ----------------------------------------------------------------------------
# rich takes any all-digit COLUMNS: COLUMNS=0 printed nothing at all (exit 0, empty stdout), COLUMNS=1 one character a
# line. 0 now reads as unset (the --help formatter's and shutil's rule: the terminal's width, else 80) and widths
# below 20 as 20.

@pytest.mark.parametrize("columns", ["0", "1", "3"])
def test_tiny_columns_still_print_a_readable_result(cli, monkeypatch: pytest.MonkeyPatch, columns: str) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", columns)
    r = cli("predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8")
    assert r.code == 0, r.err
    first = r.out.splitlines()[0]
    assert first.startswith("gpt-1.7b on 8 x"), r.out[:300]
    assert 15 <= max(len(line) for line in r.out.splitlines()) <= (80 if columns == "0" else 20), r.out[:300]


def test_ordinary_columns_are_kept(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", "100")
    r = cli("predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8")
    assert r.code == 0 and 80 < max(len(line) for line in r.out.splitlines()) <= 100, r.out[:300]


# --- --install-completion where the shell's rc file cannot be written -----------------------------------------------
# HOME naming a file (HOME=/etc/passwd: FileExistsError from mkdir), a folder that cannot hold it, or an rc file that
# is not UTF-8 text (UnicodeDecodeError) was a traceback with exit status 1.

def test_install_completion_into_an_unwritable_home_is_refused(cli, monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a_file = tmp_path / "home-is-a-file"
    a_file.write_text("x\n")
    monkeypatch.setenv("HOME", str(a_file))
    line = refused(cli, "--install-completion", "bash", inputs=(a_file,))
    assert line.startswith(f"error: --install-completion: cannot add the completion script to {a_file}/.bashrc: "), line
    assert line.endswith("; a HOME whose .bashrc can be written, or --show-completion bash to print the script and "
                         "add it by hand"), line


def test_install_completion_next_to_an_rc_file_that_is_not_text_is_refused(cli, monkeypatch: pytest.MonkeyPatch,
                                                                            tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rc = tmp_path / ".bashrc"
    rc.write_bytes(b"\xff\xfe")
    monkeypatch.setenv("HOME", str(tmp_path))
    refused(cli, "--install-completion", "bash", inputs=(rc,), match=".bashrc: not UTF-8 text; ")


def test_install_completion_into_a_fresh_home_still_writes(cli, monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HOME", str(tmp_path))
    r = cli("--install-completion", "bash")
    assert r.code == 0 and "_SCALEMODEL_COMPLETE" in (tmp_path / ".bashrc").read_text(), r.err


# --- SIGTERM to a sweep with local workers --------------------------------------------------------------------------
# kill / timeout(1) / a cancelled CI job send SIGTERM to the sweep alone: it ended at once and its worker processes
# went on computing their chunks as orphans (minutes of CPU each on a 100,000-point grid). Now the workers are
# stopped and the sweep exits with SIGTERM's status, 143, having printed nothing.

def _children(pid: int) -> set[int]:
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads child processes from /proc")
def test_sigterm_to_a_sweep_stops_its_workers(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    gpus = ",".join(str(8 * (i + 1)) for i in range(1000))
    f.write_text(f"kind: sweep\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\ngpus: [{gpus}]\n"
                 "strategies: [{tp: 1, label: a}, {tp: 2, label: b}]\n")
    p = subprocess.Popen([sys.executable, "-m", "scalemodel", "sweep", str(f), "-j", "2", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, start_new_session=True)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 10
        while len(workers) < 2 and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.2)
            workers = _children(p.pid)
        assert len(workers) == 2 and p.poll() is None, "the sweep ended before its workers could be seen"
        time.sleep(1)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=5)
        assert p.returncode == 143 and out == b"" and b"Traceback" not in err, err[-2000:]
        deadline = time.monotonic() + 2
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [w for w in workers if _alive(w)], "workers outlived the sweep"
    finally:  # whatever failed (review24i): the sweep and any worker it left (its own session) do not outlive the test
        with contextlib.suppress(ProcessLookupError):  # workers keep the pipes: killed before reading them to EOF
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate()


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (its parent gone, init reaps it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


# review24i: the sweep's stream is closed when its consumer raises, and a SIGTERM the caller ignores stays ignored.

def _small_sweep(tmp_path: Path) -> Path:
    f = tmp_path / "small.yaml"
    f.write_text("kind: sweep\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\ngpus: [8, 16, 32, 64]\n"
                 "strategies: [{tp: 1, label: a}, {tp: 2, label: b}]\n")
    return f


def test_a_sweep_whose_consumer_raises_stops_its_workers(tmp_path: Path) -> None:
    """SIGTERM (or any error) landing in the progress callback, between two chunks, raised outside the stream's
    generator: it stayed suspended (the traceback holds run_grid's frame), its pool's workers went on, and the
    interpreter's exit joined the pool, waiting for every chunk. run_grid now closes the stream."""
    def progress(done: int, total: int) -> None:
        if done:
            raise RuntimeError("stop")

    spec, models, clusters = load_sweep(_small_sweep(tmp_path))
    try:
        with pytest.raises(RuntimeError, match="stop") as caught:  # held, as the CLI holds a SystemExit to the end
            run_grid(spec, models, clusters, workers=2, progress=progress)
        assert multiprocessing.active_children() == []
    finally:  # before the fix: the generator closes with run_grid's frame, which the traceback held
        del caught


def test_a_sweep_under_an_ignored_sigterm_runs_on(tmp_path: Path) -> None:
    """A sweep started with SIGTERM ignored (a supervisor's choice, inherited across exec) exited 143 on SIGTERM:
    the grid's handler replaced SIG_IGN. It is installed only where SIGTERM has its default action."""
    script = ("import os, signal, sys\n"
              "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "from scalemodel.engine.grid import run_grid\n"
              "from scalemodel.specs.sweep import load_sweep\n"
              "def progress(done, total):\n"
              "    if done:\n"
              "        os.kill(os.getpid(), signal.SIGTERM)\n"
              "r = run_grid(*load_sweep(sys.argv[1]), workers=2, progress=progress)\n"
              "print(len(r.rows))\n")
    p = subprocess.run([sys.executable, "-c", script, str(_small_sweep(tmp_path))], capture_output=True, text=True,
                       timeout=15)
    assert p.returncode == 0 and p.stdout.split() == ["8"], (p.returncode, p.stderr[-2000:])


def test_sigterm_between_chunks_exits_at_once_without_a_traceback(tmp_path: Path) -> None:
    """SIGTERM landing in the progress callback (between two chunks) with chunks still queued: the stream cancelled
    the queued futures and then terminated the workers; Python 3.11's pool manager, finding the pool broken, set
    BrokenProcessPool on every pending future, cancelled ones included (InvalidStateError, 'Exception in thread'
    on stderr), died before closing the call queue's reader, and the interpreter's exit waited forever on the queue's
    feeder thread (its pipe no longer read). The futures are left to the manager, which fails them itself."""
    f = tmp_path / "grid.yaml"
    gpus = ",".join(str(8 * (i + 1)) for i in range(48))
    f.write_text(f"kind: sweep\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\ngpus: [{gpus}]\n"
                 "strategies: [{tp: 1, label: a}, {tp: 2, label: b}]\n")
    script = ("import os, signal, sys\n"
              "from scalemodel.engine.grid import run_grid\n"
              "from scalemodel.specs.sweep import load_sweep\n"
              "def progress(done, total):\n"
              "    if done:\n"
              "        os.kill(os.getpid(), signal.SIGTERM)\n"
              "run_grid(*load_sweep(sys.argv[1]), workers=2, progress=progress)\n")
    p = subprocess.Popen([sys.executable, "-c", script, str(f)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=15)
    finally:  # a hung run is killed with its workers (its own session)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
    assert p.returncode == 143 and "Traceback" not in err and out == "", (p.returncode, err[-2000:])
