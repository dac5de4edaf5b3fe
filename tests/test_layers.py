"""The house's structure (DESIGN.md "Layers"): imports go one way, at module top, without cycles.

- each layer imports only the layers below it: commands -> report -> engine -> cost -> specs ->
  choices -> units, errors;
- no module imports another inside a function, except the optional heavy dependencies (scipy,
  matplotlib, dask, pyarrow), each with a one-line reason on the import line, rich inside a report/
  function's table branch (so a --json query never loads it), and the few modules only a rare path
  uses (RARE_PATH), also with the reason on the line;
- the graph of top-level internal imports has no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "scalemodel"
#: layer of each top-level part of the package; a module may import only from layers <= its own
LAYERS = {"errors": 0, "units": 0, "choices": 1, "specs": 2, "cost": 3, "engine": 4, "report": 5,
          "commands": 6, "cli": 7, "__main__": 7, "__init__": 7, "api": 7}
HEAVY = ("scipy", "matplotlib", "dask", "distributed", "pyarrow")
#: Loaded only where a report/ function prints a table: --json output needs none of it (12 ms of a query).
TABLES_ONLY = ("rich",)
#: Modules (full names) that only a rare path uses, imported inside its function so that a query does not pay
#: for them: the Gauss-Hermite nodes of the exact order statistics (all of numpy.polynomial, ~4 ms), and the
#: temporary file of an atomic write (report.output.write_file; tempfile loads random and shutil), the YAML
#: reader (PyYAML, ~10 ms), needed only for files outside the precompiled built-in catalog and --set values, and
#: the readers of --strategy files (specs.frameworks, which imports at its top the readers of the DeepSpeed,
#: Megatron-LM and torchtitan formats: specs.deepspeed_config, specs.megatron_args with specs.shell_words and
#: specs.stage_layers, specs.torchtitan_config; no module imports those inside a function), and check's
#: strategy refusals that `hardware validate` runs on a scenario file only (engine.check loads the sweep and the
#: planner, which `hardware list/show` never need).
RARE_PATH = ("numpy.polynomial.hermite_e", "tempfile", "difflib", "tomllib", "tomli", "scalemodel.specs.yamlread",
             "scalemodel.specs.frameworks", "scalemodel.engine.check")


def _modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = ast.parse(path.read_text(), filename=str(path))
    return out


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS["__init__"] if len(parts) == 1 else LAYERS[parts[1]]


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    return [a.name for a in node.names]


def test_imports_go_down_the_layers() -> None:
    bad = []
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _imported(node):
                    if target.startswith("scalemodel.") and _layer(target) > _layer(name):
                        bad.append(f"{name} imports {target}")
    assert not bad, bad


def test_no_imports_inside_functions_but_optional_heavy_ones() -> None:
    bad = []
    for name, tree in _modules().items():
        source = (PACKAGE.parent / (name.replace(".", "/") + ".py"))
        lines = source.read_text().splitlines() if source.exists() else []
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    tops = [t.split(".")[0] for t in _imported(node)]
                    heavy = all(t in HEAVY for t in tops) or all(t in RARE_PATH for t in _imported(node)) or (
                        name.startswith("scalemodel.report.") and all(t in TABLES_ONLY for t in tops))
                    reason = "#" in lines[node.lineno - 1] if lines else False
                    if not (heavy and reason):
                        bad.append(f"{name}:{node.lineno} {', '.join(_imported(node))}")
    assert not bad, bad


def test_no_import_cycles() -> None:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, tree in modules.items():
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _imported(node):
                    for cand in (target, *(f"{target}.{a.name}" for a in getattr(node, "names", []))):
                        if cand in modules and cand != name:
                            graph[name].add(cand)
    # a package imports its submodules on purpose (re-exports); those edges are not cycles
    graph = {m: {t for t in ts if not t.startswith(m + ".")} for m, ts in graph.items()}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                return path[path.index(t):] + [t]
            if t not in state:
                found = visit(t)
                if found:
                    return found
        state[m] = 2
        path.pop()
        return None

    for m in sorted(graph):
        if m not in state:
            cycle = visit(m)
            assert cycle is None, " -> ".join(cycle)
