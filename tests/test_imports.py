"""A query imports only what it uses: the CLI loads a command's module when that command runs."""

from __future__ import annotations

import functools
import subprocess
import sys

import pytest

RUN = """
import sys
from scalemodel.cli import main
try:
    main({args!r})
except SystemExit:
    pass
sys.stderr.write("\\n".join(sorted(sys.modules)))
"""


@functools.cache
def _modules(code: str) -> frozenset[str]:
    """The modules a fresh interpreter has loaded after running ``code``. Made once a process for each code (ci33):
    several tests ask the same query different questions (plan --json: numpy.ma, rich, fractions, pathlib), and a
    fresh interpreter loads the same modules each time it runs the same code."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return frozenset(r.stderr.split("\n"))


def test_collective_imports_neither_the_step_model_nor_the_planner():
    mods = _modules(RUN.format(args=["collective", "-c", "dgx-a100", "-n", "64", "--json"]))
    assert "scalemodel.engine.collective" in mods
    for name in ("scalemodel.engine.step", "scalemodel.engine.planner", "scalemodel.engine.job", "scipy",
                 "matplotlib"):
        assert name not in mods


@pytest.mark.parametrize("command", ["predict", "memory", "plan", "scale", "stragglers", "calibrate"])
def test_command_modules_import_no_optional_heavy_dependency(command):
    mods = _modules(f"import sys, scalemodel.commands.{command}; sys.stderr.write('\\n'.join(sorted(sys.modules)))")
    assert not any(m == "scipy" or m.startswith(("scipy.", "matplotlib")) for m in mods)


def test_predict_runs_without_matplotlib():
    mods = _modules(RUN.format(args=["predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8",
                                     "--pp", "8", "--json"]))
    assert "scalemodel.engine.predict" in mods and "scalemodel.engine.planner" not in mods
    assert not any(m.startswith("matplotlib") for m in mods)


def test_predict_without_stragglers_loads_no_scipy():
    """At straggler CV 0 every order statistic is the mean: no quadrature, so scipy stays unloaded."""
    mods = _modules(RUN.format(args=["predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8",
                                     "--pp", "8", "--straggler-cv", "0", "--json"]))
    assert "scalemodel.engine.step" in mods
    assert not any(m == "scipy" or m.startswith("scipy.") for m in mods)


def test_order_statistics_at_cv_zero_are_the_mean():
    import numpy as np

    from scalemodel.cost import stragglers

    out = stragglers.expected_max_step(np.asarray([1.0, 2.5]), 0.0, np.asarray([[1.0], [1000.0]]))
    assert out.shape == (2, 2) and np.all(out == np.asarray([1.0, 2.5]))


@pytest.mark.parametrize("args", [
    ["predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--pp", "8"],
    ["memory", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--pp", "8"],
    ["collective", "-c", "dgx-a100", "-n", "1024", "--size", "1GiB"],
    ["plan", "-c", "dgx-a100", "-m", "gpt3-175b", "-n", "64", "--json"],  # the planner's np.unique calls
])
def test_queries_do_not_load_numpy_ma(args):
    """np.unique and np.quantile import numpy.ma (10 ms) from numpy 2.3 on; a what-if query needs neither."""
    assert "numpy.ma" not in _modules(RUN.format(args=args))


@pytest.mark.parametrize("args", [
    ["predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--pp", "8", "--json"],
    ["memory", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--pp", "8", "--json"],
    ["collective", "-c", "dgx-a100", "-n", "1024", "--size", "1GiB", "--json"],
    ["plan", "-c", "dgx-a100", "-m", "gpt3-175b", "-n", "64", "--json"],  # its progress bar imports rich on a terminal
])
def test_json_queries_do_not_load_rich(args):
    """rich renders tables; a --json query imports it only where a table is printed (report/)."""
    mods = _modules(RUN.format(args=args))
    assert "scalemodel.report.output" in mods and not any(m == "rich" or m.startswith("rich.") for m in mods)


@pytest.mark.parametrize("args", [
    ["predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--pp", "8", "--json"],
    ["predict", "-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", "256", "--ep", "8", "--json"],
    ["memory", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--pp", "8", "--json"],
    ["plan", "-c", "dgx-a100", "-m", "gpt3-175b", "-n", "64", "--json"],
])
def test_json_queries_do_not_load_fractions(args):
    """fractions (~1 ms: a verbose regex compiled at import) came only with engine/pipeline_ranks' hybrid-rank keys,
    now reduced integer pairs (pipeline_ranks._share); a table's rich imports it (rich/_ratio.py), a --json query
    does not."""
    assert "fractions" not in _modules(RUN.format(args=args))


@pytest.mark.parametrize("args", [
    ["predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--pp", "8", "--json"],
    ["predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--pp", "8", "--straggler-cv", "0"],
    ["memory", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--pp", "8", "--json"],
    ["collective", "-c", "dgx-a100", "-n", "1024", "--size", "1GiB", "--json"],
    ["plan", "-c", "dgx-a100", "-m", "gpt3-175b", "-n", "64", "--json"],
])
def test_queries_do_not_load_pathlib(args):
    """Python 3.11's pathlib imports urllib.parse (for as_uri), which imports ipaddress: +21 M instructions, ~3% of
    `predict --json` (benchmarks/README.md, tenth round). A query handles paths as str (specs.files.clean and its
    kin keep pathlib's spelling of them); pathlib stays in the commands that write or list files."""
    mods = _modules(RUN.format(args=args))
    assert "scalemodel.specs.loader" in mods
    assert not {"pathlib", "urllib", "urllib.parse", "ipaddress"} & mods


def test_collective_imports_no_workload_training_scenario_or_framework_spec():
    """scalemodel.specs re-exports those on first use and collective's options live in commands/options.py:
    a command that reads only a cluster imports (and builds validators for) only the cluster's specs."""
    mods = _modules(RUN.format(args=["collective", "-c", "dgx-a100", "-n", "64", "--json"]))
    assert "scalemodel.specs.cluster" in mods
    # scalemodel.choices (the vocabulary, ~3 ms) is needed: the cluster's transport field and the rank order
    for name in ("scalemodel.specs.workload", "scalemodel.specs.training", "scalemodel.specs.scenario",
                 "scalemodel.specs.frameworks", "scalemodel.specs.strategy_file", "scalemodel.specs.deepspeed_config",
                 "scalemodel.specs.megatron_args", "scalemodel.specs.shell_words", "scalemodel.specs.stage_layers",
                 "scalemodel.specs.torchtitan_config", "scalemodel.commands.common"):
        assert name not in mods


def test_spec_validators_are_built_on_first_use():
    """Importing every spec builds no validator; reading a cluster builds the cluster's only."""
    code = ("import sys\nfrom scalemodel import specs\nfrom scalemodel.specs.base import built\n"
            "names = ('ClusterSpec', 'TransformerWorkload', 'TrainingSpec', "
            "'ScenarioSpec')\nbefore = [n for n in names if built(getattr(specs, n))]\n"
            "specs.load_cluster('dgx-a100')\nafter = [n for n in names if built(getattr(specs, n))]\n"
            "sys.stderr.write(repr((before, after)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stderr == repr(([], ["ClusterSpec"]))


def test_predict_without_stragglers_loads_no_numpy_polynomial():
    """The Gauss-Hermite nodes (numpy.polynomial, ~4 ms to import) serve only the exact order statistics,
    which need scipy too; a query at straggler CV 0 loads neither."""
    mods = _modules(RUN.format(args=["predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8",
                                     "--pp", "8", "--straggler-cv", "0", "--json"]))
    assert "scalemodel.cost.stragglers" in mods
    assert not any(m.startswith("numpy.polynomial") for m in mods)


@pytest.mark.parametrize("args", [
    ["predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--pp", "8"],
    ["predict", "-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", "256", "--ep", "8", "--json"],
    ["collective", "-c", "dgx-h100", "-n", "2048", "--size", "1GiB", "--json"],
])
def test_queries_on_builtin_names_do_not_load_yaml(args):
    """The built-in catalog's documents are parsed ahead of time (scalemodel/data/catalog.json): PyYAML
    (~10 ms) is imported only for other files and --set values."""
    mods = _modules(RUN.format(args=args))
    assert "scalemodel.specs.precompiled" in mods
    assert not any(m == "yaml" or m.startswith("yaml.") for m in mods)


def test_a_cluster_file_outside_the_catalog_is_read_as_yaml(tmp_path):
    f = tmp_path / "my-cluster.yaml"
    f.write_text("extends: dgx-a100\nname: my-cluster\n")
    mods = _modules(RUN.format(args=["collective", "-c", str(f), "-n", "64", "--json"]))
    assert "yaml" in mods
