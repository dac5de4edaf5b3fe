"""Shared test helpers: run the CLI in-process and capture its output and exit status."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

try:
    import fcntl
except ImportError:  # not POSIX: each pytest-xdist worker computes validate_all itself (_shared_across_workers)
    fcntl = None  # type: ignore[assignment]

import scalemodel.engine.calibrate_runs as calibrate_runs
from scalemodel.specs import load_cluster, notices

# No per-example deadline: hypothesis' default 200 ms is a timing assertion, which the house rules keep out of tests
# (speed is measured in benchmarks/); on a loaded machine it failed a quantile property that holds (round 19).
settings.register_profile("scalemodel", deadline=None)
# CI (.ci/run sets SCALEMODEL_CI=1) draws the same examples every run: a landing is judged on the code, not on the
# draw. Two random CI draws found real bugs (rhd fold at p 25, session 34; uneven hierarchical / NVLSTree levels,
# session 35), each a day late and on a red run; local runs keep drawing anew (the profile above), and property
# sweeps at many seeds are how new counterexamples are searched for (tests/README.md, "Property tests").
# CI also draws 50 examples where a test sets no count of its own (hypothesis' default 100): the 65 such properties
# were ~79 s of the suite's CPU (ci41) with CI at its 10-minute budget; local runs keep 100 fresh draws each.
settings.register_profile("ci", deadline=None, derandomize=True, max_examples=50)
settings.load_profile("ci" if os.environ.get("SCALEMODEL_CI") else "scalemodel")


#: The checkout's root: tests open the repository's files (examples/, hardware/, README.md) under it, never relative to
#: the working directory, so that pytest runs from any directory.
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fits_without_leave_one_out(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """`calibrate runs` refits once per run for its leave-one-out band (calib19band), which tripled the time of the
    ~40 tests that fit runs for other reasons (their files 67 -> 195 s). Those tests fit in-sample only; the
    leave-one-out refits are tested where they are the subject, tests/test_calibrate_band.py, and in the CLI tests
    that run `calibrate runs` in a subprocess. A module- or session-scoped fixture is set up before this per-test
    switch: one that fits sets LOO_MAX_RUNS itself, 0 for an in-sample fit (test_calibrate_runs.eight_runs_fit) or
    its own bound for the refits (test_calibrate_runs_speed's loo_fit); one that sets nothing runs the refits."""
    if request.node.path.name != "test_calibrate_band.py":
        monkeypatch.setattr(calibrate_runs, "LOO_MAX_RUNS", 0)


#: :func:`fit_runs_once`'s fits: the SHA-256 of its arguments' pickle -> the fit's pickle and the warnings it raised
_FITS: dict[bytes, tuple[bytes, list[str]]] = {}


def fit_runs_once(runs, *, source="", out=None, only=None):  # type: ignore[no-untyped-def]
    """``calibrate_runs.fit_runs`` made once a process for each content of its arguments (tests/README.md, ci32).

    The key is the pickle of the runs (every field of each MeasuredRun: the cluster, workload, training, strategy,
    the measured step and where the run was read), ``source``, ``only`` and the module's upper-case constants (a
    test's ``LOO_MAX_RUNS`` among them): equal bytes are equal inputs, so a hit is the fit the call would make. Each
    call gets a fresh copy (unpickled: a test may change its fit) and the warnings the fit raised (notices), raised
    again. ``out`` is left out of the key: fit_runs only records it (``inputs["out"]``), which is set on the copy.
    Only for callers that patch nothing else the fit calls (a patched ``evaluate`` would not be seen)."""
    consts = sorted((k, v) for k, v in vars(calibrate_runs).items() if k.isupper() and not callable(v))
    key = hashlib.sha256(pickle.dumps((runs, source, only, consts))).digest()
    if key not in _FITS:
        try:
            with notices.collecting() as said:
                fit = calibrate_runs.fit_runs(runs, source=source, only=only)
        except BaseException:
            for line in said:  # as the fit would have left them: raised in this invocation
                notices.warn(line)
            raise
        _FITS[key] = pickle.dumps(fit), said
    blob, said = _FITS[key]
    for line in said:
        notices.warn(line)
    fit = pickle.loads(blob)
    fit.inputs["out"] = out
    return fit


@pytest.fixture
def fit_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`calibrate runs` (in-process, conftest's ``cli``) and ``scalemodel.calibrate_runs`` fit through
    :func:`fit_runs_once`: the tests of one runs file that fit it the same way (test_calibrate_runs' 8 runs: the
    overlay, --predict-at, --out, the Python API, test_calib27's --json) share one fit a process instead of ~12 s
    of CPU each; what they check is what the command does with the fit (the fit itself is checked on the fixture's
    own, which is the first entry)."""
    monkeypatch.setattr("scalemodel.commands.calibrate.fit_runs", fit_runs_once)
    monkeypatch.setattr("scalemodel.api.fit_runs", fit_runs_once)


@dataclass
class CliResult:
    code: int
    out: str
    err: str


def _exit_code(*args: str) -> int:
    """Run ``scalemodel`` in-process; its exit status."""
    from scalemodel.cli import main

    try:
        main(list(args))
    except SystemExit as exc:  # main() always ends with SystemExit
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Call ``scalemodel`` with a list of arguments; returns exit code, stdout and stderr."""

    def run(*args: str) -> CliResult:
        code = _exit_code(*args)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def cli_once(*args: str) -> CliResult:
    """:func:`cli` for a module- or session-scoped fixture (where capsys is not available): the output is captured
    by redirecting sys.stdout / sys.stderr, so a command whose output several tests read runs once."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = _exit_code(*args)
    return CliResult(code, out.getvalue(), err.getvalue())


def validation_cases_path():  # type: ignore[no-untyped-def]
    """../shared/validation/cases.yaml beside the checkout, else the copy kept in tests/data."""
    shared = ROOT.parent / "shared" / "validation" / "cases.yaml"
    return shared if shared.is_file() else ROOT / "tests" / "data" / "validation" / "cases.yaml"


@functools.cache
def script_module(name: str):  # type: ignore[no-untyped-def]
    """scripts/<name>.py as a module, loaded once per test session (its caches are shared by the tests)."""
    import importlib.util
    import sys

    path = ROOT / "scripts" / f"{name}.py"
    if str(path.parent) not in sys.path:  # the scripts import their siblings (measurement_file, generated_file)
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(mod)
    if name == "validate_training":
        mod.validate_all = _shared_across_workers(mod.validate_all)
    return mod


#: Under pytest-xdist, the run's temporary root (the controller's basetemp, shared by the workers, pruned by pytest
#: as every basetemp is); empty in a run without workers
_RUN_ROOT: list[Path] = []


@pytest.fixture(scope="session", autouse=True)
def _xdist_run_root(tmp_path_factory: pytest.TempPathFactory) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker's basetemp is <the run's basetemp>/gwN
        _RUN_ROOT.append(tmp_path_factory.getbasetemp().parent)


def _inputs_digest() -> str:
    """SHA-256 of every file that validate_all reads or runs: the package, the scripts, the hardware catalog, the
    case files (validation/, and the shared or tests/data copy of the original cases)."""
    h = hashlib.sha256()
    tops = [ROOT / d for d in ("scalemodel", "scripts", "hardware", "validation", "tests/data/validation")]
    shared = ROOT.parent / "shared" / "validation" / "cases.yaml"
    files = [shared] if shared.is_file() else []
    for top in tops:
        files += sorted(p for p in top.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for p in files:
        h.update(str(p.relative_to(ROOT.parent)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def shared_once(name: str, compute):  # type: ignore[no-untyped-def]
    """``compute()`` made once a test run rather than once per pytest-xdist worker: the first worker to ask computes
    it under a file lock and pickles it under the run's temporary root, keyed by ``name`` and :func:`_inputs_digest`;
    the others wait for the lock and read it (a fresh copy each). Outside xdist (or without fcntl) it is computed."""
    if fcntl is None or not _RUN_ROOT:
        return compute()
    path = _RUN_ROOT[0] / f"{name}-{_inputs_digest()}.pickle"
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if path.is_file():
            return pickle.loads(path.read_bytes())
        got = compute()
        part = path.with_suffix(".part")
        part.write_bytes(pickle.dumps(got))
        part.replace(path)
        return got


def _shared_across_workers(compute):  # type: ignore[no-untyped-def]
    """scripts/validate_training.py's ``validate_all`` (every row of both case files priced, ~30 s of CPU) through
    :func:`shared_once`, once a process as the script's own lru_cache keeps it."""
    cached = functools.cache(lambda: shared_once("validate_all", compute))
    # the uncached run, as the script's own lru_cache exposes it: tests that point NEW_CASES at a file of their own
    # call validate_all.__wrapped__ (test_framework_fields, test_docs32, test_review32c)
    cached.__wrapped__ = getattr(compute, "__wrapped__", compute)  # type: ignore[attr-defined]
    return cached


def load_yaml(path):  # type: ignore[no-untyped-def]
    """A YAML data file of the repository (gemm.yaml, validation/training_cases.yaml, ...) as ``yaml.safe_load``
    gives it: scripts/repo_yaml.py's reader, which the scripts under test use too, so a file is parsed once per
    session (libyaml's CSafeLoader, the same documents) and handed out as a deep copy a test may change. Tests of how
    the product itself reads YAML keep calling the product."""
    return script_module("repo_yaml").read_yaml(path)


def training_cases() -> dict:  # type: ignore[type-arg]
    """validation/training_cases.yaml by case id (the test is skipped where the file is absent)."""
    path = ROOT / "validation" / "training_cases.yaml"
    if not path.is_file():
        pytest.skip("validation/training_cases.yaml not present")
    return {c["id"]: c for c in load_yaml(path)}


#: A Megatron-LM launch for Mixtral 8x7B: its parallel layout (tp 2, pp 2, the distributed optimizer, micro-batch 1,
#: the flex dispatcher with DeepEP) and framework settings that no search axis holds (plan --strategy and
#: scale --best --strategy read it: tests/test_plan_strategy_file.py, tests/test_scale_best_strategy_file.py).
MIXTRAL_MEGATRON_LAUNCH = (
    "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
    "--micro-batch-size 1 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
    "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep --moe-flex-dispatcher-num-sms 24 "
    "--decoder-first-pipeline-num-layers 6 --fp8-format hybrid --fp8-param-gather --tp-comm-overlap\n")


@pytest.fixture
def mixtral_launch(tmp_path):  # type: ignore[no-untyped-def]
    """:data:`MIXTRAL_MEGATRON_LAUNCH` written to a run.sh of its own."""
    f = tmp_path / "run.sh"
    f.write_text(MIXTRAL_MEGATRON_LAUNCH)
    return f


def assert_mixtral_launch_pinned(strategy: dict) -> None:  # type: ignore[type-arg]
    """A plan's or scale point's JSON strategy carries :data:`MIXTRAL_MEGATRON_LAUNCH`'s values as written."""
    s = strategy
    assert (s["tp"], s["pp"], s["zero"], s["micro_batch"]) == (2, 2, "1", 1)
    assert s["ep_dispatch_sms"] == 24 and s["first_stage_layers"] == 6
    assert s["megatron_ddp"] and s["fp8_param_gather"] and s["tp_comm_overlap"] and s["overlap_param_gather"]
    assert s["moe_flex_dispatcher"] and s["moe_flex_backend"] == "deepep"


@pytest.fixture(scope="module")
def a100():  # type: ignore[no-untyped-def]
    """The built-in dgx-a100 cluster (tests that price a strategy on it by hand)."""
    return load_cluster("dgx-a100")


def assert_plan_is_brute_force_best(res, brute, key):  # type: ignore[no-untyped-def]
    """The planner's search ``res`` against ``brute``, every candidate priced one by one as (step seconds, feasible,
    key) rows: the same candidates and feasible counts, and its winner the fastest feasible row (same step time and
    ``key(winner)``). Returns the winner and that row."""
    assert res.candidates_evaluated == len(brute)
    assert res.feasible == sum(1 for r in brute if r[1])
    best = min((r for r in brute if r[1]), key=lambda r: r[0])
    win = res.ranked[0]
    assert win.step_time_s == pytest.approx(best[0], rel=1e-12)
    assert key(win) == best[2]
    return win, best
