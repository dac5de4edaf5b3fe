"""`scalemodel hardware list | show NAME | validate FILE`: the built-in catalog and spec checking."""

from __future__ import annotations

from pathlib import Path

from scalemodel.commands.args import Command, arg, repeat
from scalemodel.commands.options import JSON
from scalemodel.engine.hardware import catalog, show_spec, validate_spec
from scalemodel.report.hardware import render_catalog, render_spec, render_validation
from scalemodel.specs.files import refuse_trailing_slash

#: The spec's own field paths, or the root the other commands use (engine.hardware._SET_ROOTS).
SPEC_SET = repeat("--set", dest="sets", metavar="PATH=VALUE",
                  help="Override a field of the spec, by its path in it (tiers.ib-leaf.bandwidth=100Gbps, layers=48) "
                       "or with the root the other commands use (cluster., accelerator., model.); repeatable.")


def list_(*, as_json: bool) -> None:
    """List the built-in accelerators, clusters, workloads and scenarios."""
    render_catalog(catalog(), as_json=as_json)


def show(*, name: str, sets: list[str] | None, as_json: bool) -> None:
    """Show one spec as the YAML it loads to: every field, in SI units (bytes, FLOP/s, B/s, s), sources last."""
    render_spec(show_spec(name, sets), as_json=as_json)


def validate(*, file: str, sets: list[str] | None, as_json: bool) -> None:
    """Validate a spec file: exit 0 when valid, 2 (with the reason) when not."""
    refuse_trailing_slash(file, "spec file")  # the Path drops it: "cluster.yaml/" was validated as the file
    render_validation(validate_spec(Path(file), sets), as_json=as_json)


COMMAND = Command("hardware", None, subcommands=(
    Command("list", list_, (JSON,)),
    Command("show", show, (arg("name", "A built-in name (`scalemodel hardware list`) or a spec file."), SPEC_SET,
                           JSON)),
    Command("validate", validate, (arg("file", "The spec file to check."), SPEC_SET, JSON)),
), help="List, show and validate specs: built-in accelerators, clusters, workloads, scenarios, or a file.")
