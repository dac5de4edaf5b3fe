"""Render `scalemodel hardware`: the catalog tables, one spec as YAML, a validation verdict, or JSON."""

from __future__ import annotations

import re
import textwrap
from typing import Any

import yaml
from rich.table import Table

from scalemodel.engine.hardware import Catalog, SpecView
from scalemodel.errors import one_line
from scalemodel.report.output import emit_json, new_console, print_table, stdout_encodes, verbatim
from scalemodel.specs import yamlread
from scalemodel.units import format_quantity as fq


def _short(text: str, limit: int = 60) -> str:
    """The first clause of a description (the whole one is in `hardware show NAME` and --json)."""
    first = re.split(r" \(|, |; |: |\. ", " ".join(text.split()), maxsplit=1)[0]
    return first if len(first) <= limit else first[:limit - 3].rstrip() + "..."


def render_catalog(data: Catalog, *, as_json: bool) -> None:
    if as_json:
        emit_json(data.payload(), "hardware list")
        return
    t = Table(title="Accelerators (TDP n/p: not published)")
    # memory: what the commands take as the capacity ('of 85.05 GB per GPU'), not the driver's total (85.52 GB on
    # an H100, hardware show's accelerator.memory), which the list printed beside every command's smaller figure
    for col in ("name", "bf16 dense", "usable memory", "mem bw", "TDP", "description"):
        t.add_column(col)
    for a in data.accelerators:
        bf16 = fq(a["bf16_flops_per_s"], "flop_rate") if a["bf16_flops_per_s"] else "-"
        t.add_row(a["name"], bf16, fq(a["memory_allocatable_bytes"], "bytes", binary=False),
                  fq(a["memory_bandwidth_Bps"], "bandwidth"),
                  fq(a["tdp_w"], "power") if a["tdp_w"] else "n/p", _short(a["description"]))
    c = Table(title="Clusters (tiers innermost first: span x per-GPU bandwidth)")
    for col in ("name", "accelerator", "GPUs/node", "tiers", "description"):
        c.add_column(col)
    for cl in data.clusters:
        # one tier a line; "8x300GB/s" keeps a tier's figures together when the column wraps
        tiers = "\n".join(f"{t['name']} {t['span']}x{fq(t['bandwidth_Bps'], 'bandwidth').replace(' ', '')}"
                          for t in cl["tiers"])
        c.add_row(cl["name"], cl["accelerator"], str(cl["gpus_per_node"]), tiers, _short(cl["description"]))
    w = Table(title="Workloads (--model NAME)")
    for col in ("name", "kind", "shape", "description"):
        w.add_column(col)
    for x in data.workloads:
        if x["kind"] == "transformer":
            shape = f"{x['layers']} x {x['hidden']}, {x['heads']} heads, seq {x['seq_len']}"
            if x["moe_experts"]:
                shape += f", {x['moe_experts']} experts"
            count = x["params"] or x.get("params_priced")
            if count:  # 1.01T, not '1.01e+03B'
                size = f"{count / 1e12:.3g}T" if count >= 1e12 else f"{count / 1e9:.3g}B"
                shape = f"{size} params; " + shape
        else:
            shape = f"{fq(x['flops_per_sample'], 'flops')}/sample fwd"
        w.add_row(x["name"], x["kind"], shape, _short(x["description"]))
    s = Table(title="Scenarios (scalemodel scale --scenario NAME)")
    for col in ("name", "model on cluster", "GPUs", "description"):
        s.add_column(col)
    for x in data.scenarios:
        s.add_row(x["name"], f"{x['model']} on {x['cluster']}",
                  ",".join(map(str, x["gpus"])) + f" ({x['mode']})", _short(x["description"]))
    console = new_console()
    for table in (t, c, w, s):
        print_table(console, table)



def _sources_last(d: Any) -> Any:
    """The spec with each ``sources:`` mapping after the values it cites (values first, as users read)."""
    if isinstance(d, dict):
        out = {k: _sources_last(v) for k, v in d.items() if k != "sources"}
        if "sources" in d:
            out["sources"] = d["sources"]
        return out
    if isinstance(d, list):
        return [_sources_last(v) for v in d]
    return d


_CITATIONS = "# [KEY] citations in sources: resolve to primary sources in hardware/SOURCES.md of the catalog"


def render_spec(view: SpecView, *, as_json: bool) -> None:
    data = view.spec.model_dump(mode="json")
    if as_json:
        emit_json({"inputs": view.inputs, "kind": view.kind, "spec": data}, "hardware show")
        return
    console = new_console()
    console.print(f"[bold]{view.kind}[/bold] {verbatim(view.spec.name)}")
    text = yaml_within(_sources_last(data), console.width)
    if not stdout_encodes(text):  # YAML's escapes ("\xA7"), not '?' (cli._tolerant_stdout): the same values
        text = yaml_within(_sources_last(data), console.width, allow_unicode=False)
    print(text)
    print(textwrap.fill(_CITATIONS, console.width, subsequent_indent="# ", break_long_words=False,
                        break_on_hyphens=False))


#: keys and strings that libyaml's emitter writes byte for byte as PyYAML's (unfolded: width 10**6). Outside them the
#: two differ, each text loading to the same value: libyaml escapes a character beyond U+FFFF even with allow_unicode
#: ("\U0001F600"), writes an empty key '' and a key of 128 characters as simple keys (PyYAML: "? ''"), counts a
#: key's bytes where PyYAML counts its characters (70 "é": a complex key in libyaml only), and writes a key holding a
#: line break or control character as a complex one. Measured (yamlc34): every built-in spec, and 16,148 random trees
#: of these characters, identical; of 20,000 random dumps with strings outside them, 14% differed.
_KEY = re.compile("[\x20-\x7e]{1,100}")
_TEXT = re.compile("[\x20-\x7e\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd]*")


def libyaml_agrees(d: Any) -> bool:
    """Whether libyaml writes ``d`` (a value under a mapping) as PyYAML does: only the keys and strings above."""
    if isinstance(d, dict):
        return all(isinstance(k, str) and _KEY.fullmatch(k) and libyaml_agrees(v) for k, v in d.items())
    if isinstance(d, list):
        return all(libyaml_agrees(v) for v in d)
    return not isinstance(d, str) or _TEXT.fullmatch(d) is not None


def yaml_within(data: Any, width: int, allow_unicode: bool = True) -> str:
    """``data`` as block YAML with every line within ``width`` columns (a terminal's, or ``COLUMNS``/80 when piped,
    as tables: output.print_table) where a space allows it: a word or number is never broken, so a line of one
    word longer than the width (a URL) stays whole. PyYAML's own folding (``width=``) breaks a line only once it
    has passed the width, a word late, so its 110 printed lines up to 226 columns; here each scalar's line is
    folded before the word that would pass the width, its continuation indented 4 past the line's (deeper than
    its key or item, so the same scalar). The indent is given to textwrap, not left in the text: a leading run of
    spaces is a chunk textwrap may leave alone on a first line and then drop, so a key wider than the width lost its
    indent (COLUMNS=25: a scanner error on 44 of the 93 built-ins). Kept only where it loads back to ``data`` (a
    wrap that does not parse is that too); else PyYAML's folding, which is lossless at every width.

    Written and read back with libyaml (yamlread.FastDumper / FastLoader: 11x less CPU than PyYAML's classes) where
    :func:`libyaml_agrees` says the text is the same byte for byte; PyYAML's classes otherwise, and for the folding
    fallback (libyaml folds a double-quoted scalar elsewhere: 58 of 1,504 built-in dumps at widths 1..200)."""
    fast = isinstance(data, dict) and libyaml_agrees(data)
    dumper = yamlread.FastDumper if fast else yaml.SafeDumper
    wrapped = []
    for line in yaml.dump(data, Dumper=dumper, sort_keys=False, width=10**6,
                          allow_unicode=allow_unicode).rstrip().splitlines():
        body = line.lstrip(" ")
        lead = line[:len(line) - len(body)]
        if len(line) <= width or "  " in body:  # a run of spaces folds to one: left to PyYAML
            wrapped.append(line)
            continue
        wrapped.extend(textwrap.wrap(body, width, initial_indent=lead, subsequent_indent=lead + "    ",
                                     break_long_words=False, break_on_hyphens=False, drop_whitespace=True))
    text = "\n".join(wrapped)
    try:
        if yaml.load(text, Loader=yamlread.FastLoader if fast else yaml.SafeLoader) == data:
            return text
    except yaml.YAMLError:  # not YAML after the wrap: PyYAML's folding below, never a traceback
        pass
    return yaml.safe_dump(data, sort_keys=False, width=width, allow_unicode=allow_unicode).rstrip()  # PyYAML's folding


def render_validation(view: SpecView, *, as_json: bool) -> None:
    file = view.inputs["file"]
    if as_json:
        emit_json({"inputs": view.inputs, "file": file, "kind": view.kind, "name": view.spec.name, "valid": True},
                  "hardware validate")
    else:
        # the path and name as every other command writes them (errors.one_line): an ESC in a folder's name coloured
        # the terminal, a byte not UTF-8 raised UnicodeEncodeError
        print(f"ok: {one_line(str(file))} is a valid {view.kind} spec ({one_line(str(view.spec.name))})")
