"""Read specs from YAML (or a HuggingFace config.json), resolve built-in names, ``extends:`` and
``--set`` overrides, and validate them, turning every problem into one clear :class:`InputError`.

Files are read through :mod:`scalemodel.specs.files` (regular files only, size-bounded) and YAML
through :mod:`scalemodel.specs.yamlread` (YAML 1.2 core schema, duplicate keys refused, bounded in
nodes, aliases and depth), except the built-in catalog's files, whose documents are parsed ahead of
time (:mod:`scalemodel.specs.precompiled`): a query on built-in names never imports PyYAML (~10 ms).
"""

from __future__ import annotations

import copy
import json
import os
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from scalemodel.errors import InputError, one_line, shown, written
from scalemodel.specs import files, notices, precompiled
from scalemodel.specs.base import (
    _NO_VALUE,
    KeyNotText,
    Spec,
    SpecError,
    allowed_for,
    convert,
    loc_text,
    set_reference_loader,
    set_refusal,
    type_at,
    written_zero_refusal,
)
from scalemodel.specs.hf import from_hf_config

if TYPE_CHECKING:
    import yaml

MAX_EXTENDS_DEPTH = 16
MAX_SET_VALUE_CHARS = 64 * 2**10  # one --set value
#: A built-in name: what the catalog's file names use, and short enough for any file system.
_BUILTIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$")

# kind -> (top-level folder of the catalog, sub-folder)
CATALOG = {
    "accelerator": ("hardware", "accelerators"),
    "cluster": ("hardware", "clusters"),
    "workload": ("examples", "workloads"),
    "scenario": ("examples", "scenarios"),
}


def _catalog_dir(kind: str) -> str:
    top, sub = CATALOG[kind]
    here = files.parent(files.parent(files.resolved(__file__)))
    installed = files.join(here, f"_builtin/{top}/{sub}")  # inside a wheel (see pyproject force-include)
    if os.path.isdir(installed):
        return installed
    return files.join(files.parent(here), f"{top}/{sub}")  # a source checkout / editable install


def builtin_names(kind: str) -> list[str]:
    d = _catalog_dir(kind)
    if not os.path.isdir(d):
        return []
    return sorted(files.stem(n) for n in os.listdir(d) if n.endswith(".yaml"))  # pathlib's glob("*.yaml")


def builtin_path(kind: str, name: str) -> str | None:
    if not _BUILTIN_NAME.match(name):
        return None
    p = files.join(_catalog_dir(kind), f"{name}.yaml")
    return p if os.path.isfile(p) else None


def _looks_like_path(ref: str) -> bool:
    return ref.endswith((".yaml", ".yml", ".json")) or "/" in ref or "\\" in ref


#: A HuggingFace hub model id: ``org/name`` (what ``huggingface-cli download`` takes).
_HUB_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$"
_HF_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")


_DEEPSPEED_KEYS = ("zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size",
                   "gradient_accumulation_steps")
#: Framework launch configs (torchtitan TOML, a Megatron-LM script or argument list) belong to --strategy.
_FRAMEWORK_SUFFIXES = (".toml", ".sh", ".args")


def is_hf_config(data: dict[str, Any]) -> bool:
    """Whether a JSON document is a HuggingFace model config (not a workload spec in JSON)."""
    if data.get("kind") in ("transformer", "generic"):
        return False
    return any(k in data for k in (*_HF_LAYER_KEYS, "model_type", "architectures", "text_config"))


def hf_model_name(path: str | os.PathLike[str]) -> str:
    """The model's name for a config file: ``org/name`` inside a hub cache folder
    (``models--org--name/snapshots/<rev>/config.json``), else the folder (or file) name; a control character, an
    invisible one or a byte that is not UTF-8 written as its escape (errors.one_line), as a spec's name may not hold
    them (a folder named ``a\\x1b[31m`` coloured the terminal from the result's title; one with a byte not UTF-8 made
    it a UnicodeEncodeError traceback)."""
    return one_line(_hf_model_name(files.clean(path)))


def _hf_model_name(path: str) -> str:
    if files.name(path) != "config.json":
        return files.stem(path)
    parts = (files.resolved(path) if path.startswith("/") or files.exists(path) else path).split("/")
    for part in reversed(parts):
        if part.startswith("models--") and part.count("--") >= 2:
            return part.removeprefix("models--").replace("--", "/", 1)
    return files.name(files.parent(path)) or "config"


def _config_in_folder(folder: str, ref: str) -> str:
    """``config.json`` of a model folder: a ``--local-dir`` download, one snapshot of the hub cache
    (``snapshots/<rev>/config.json``: the newest), or the cache folder ``models--org--name``."""
    direct = files.join(folder, "config.json")
    if files.exists(direct):
        return direct
    snaps = files.join(folder, "snapshots")
    found = sorted(_snapshot_configs(snaps), key=lambda p: os.stat(p).st_mtime) if os.path.isdir(snaps) else []
    if found:
        if len(found) > 1:
            notices.warn(f"{ref[:200]}: {len(found)} snapshots hold a config.json; the newest, "
                         f"{files.name(files.parent(found[-1]))}, is read (give its folder to choose another)")
        return found[-1]
    raise InputError("folder holds no config.json", where=ref[:200],
                     allowed="a model folder (what `huggingface-cli download ORG/NAME --local-dir DIR` leaves), "
                             "its config.json, a workload YAML or a built-in workload name")


def _snapshot_configs(snaps: str) -> list[str]:
    """What pathlib's ``Path(snaps).glob("*/config.json")`` yields: an existing ``config.json`` in each entry of
    ``snaps`` (hidden ones too), in the order the file system lists them."""
    try:
        with os.scandir(snaps) as entries:
            names = [entry.name for entry in entries]
    except PermissionError:  # as pathlib's glob: an unreadable folder yields nothing
        return []
    return [p for p in (files.join(snaps, f"{n}/config.json") for n in names) if os.path.exists(p)]


def _beside(ref: str, relative_to: str | os.PathLike[str] | None) -> str:
    """``ref`` as a path: ~ expanded, a relative one taken from ``relative_to`` (the folder of the file naming it)."""
    p = files.expand_user(ref)
    return files.join(relative_to, p) if relative_to is not None and not p.startswith("/") else p


def resolve(kind: str, ref: str, relative_to: str | os.PathLike[str] | None = None) -> str:
    """A built-in name or a file path -> an existing file, or an error suggesting the nearest names.

    For a workload, a folder stands for its ``config.json`` (a HuggingFace snapshot folder), and a
    hub id ``org/name`` that is not a local path gets an error saying how to download it."""
    if not ref.strip():  # fuzz26: '' was the current folder ("folder holds no config.json", "'' is a file")
        raise InputError(f"an empty {kind} name ({ref!r})", where=kind,
                         allowed=f"a built-in {kind} name or a path to a YAML file (`scalemodel hardware list` shows "
                                 "the built-in ones)")
    if ref == "-":  # fuzz26: "unknown built-in workload '-'" and the whole list of names
        raise InputError("'-' (standard input) is not read", where=kind,
                         allowed=f"a built-in {kind} name or a path to a YAML file (save the piped text to a file "
                                 "first)")
    if ref.endswith(_FRAMEWORK_SUFFIXES):
        raise InputError(f"{ref[:200]!r} looks like a training framework's launch config, not {_a(kind)}",
                         where=kind, allowed="give a torchtitan TOML or Megatron-LM flags with --strategy FILE")
    if _looks_like_path(ref):
        p = _beside(ref, relative_to)
        if ref.endswith("/"):  # the clean path dropped it: "cluster.yaml/" was read as the file
            files.refuse_trailing_slash(f"{p}/", f"{kind} file")
        if kind == "workload" and not ref.endswith((".yaml", ".yml", ".json")) and os.path.isdir(p):
            return _config_in_folder(p, ref)
        if not files.exists(p):  # other kinds of file (a FIFO, a directory) are refused when read
            if kind == "workload" and re.match(_HUB_ID, ref) and not ref.endswith((".yaml", ".yml", ".json")):
                raise InputError(f"no file or folder {ref[:200]!r}; it looks like a HuggingFace hub id, and "
                                 "scalemodel reads no network", where="--model",
                                 allowed=f"download its config first, `huggingface-cli download {ref} config.json "
                                         f"--local-dir {ref.rsplit('/', 1)[-1]}`, then give that folder "
                                         f"(--model {ref.rsplit('/', 1)[-1]})")
            what = files.missing_what(p)
            raise InputError(f"{what}: {ref[:200]}" if what == "file not found" else what, where=str(p)[:200],
                             allowed=f"an existing YAML file or a built-in {kind} name")
        return p
    found = builtin_path(kind, ref)
    if found is not None:
        return found
    p = _beside(ref, relative_to)
    if kind == "workload" and os.path.isdir(p):
        return _config_in_folder(p, ref)
    if os.path.isdir(p) and len(ref) <= 200:
        # fuzz40: `scale --scenario dd` (a folder) was "'dd' is a file, ...: ./dd to read it as a scenario file",
        # which then refused ./dd as a directory
        raise InputError(f"{ref!r} is a folder, and no built-in {kind} has that name", where=kind,
                         allowed=f"a {kind} YAML file (a name ending in .yaml), or a built-in {kind} name")
    if files.exists(p) and len(ref) <= 200:  # `-m w.svg` beside a YAML file w.svg: "unknown built-in workload"
        raise InputError(f"{ref!r} is a file, but read as a built-in {kind} name: a spec file's name ends in .yaml, "
                         ".yml or .json, or holds a /", where=kind, allowed=f"./{ref} to read it as a {kind} file, "
                                                                            "or a name ending in .yaml")
    names = builtin_names(kind)
    import difflib  # error path only: a query never loads difflib
    near = difflib.get_close_matches(ref[:100], names, n=3, cutoff=0.4)
    hint = f"did you mean {', '.join(near)}?" if near else f"built-in {kind}s: {', '.join(names)}"
    shown = ref if len(ref) <= 100 else f"{ref[:60]}... ({len(ref)} characters)"
    raise InputError(f"unknown built-in {kind} {shown!r}", where=kind,
                     allowed=f"{hint} (or give a path to a YAML file; `scalemodel hardware list` shows all)")


def reference_from(kind: str, ref: str | os.PathLike[str], folder: str | os.PathLike[str]) -> str:
    """How a file in ``folder`` names the spec ``ref`` in ``extends:``: a built-in name as it is, a file
    by its path relative to ``folder`` (as :func:`resolve` reads it back)."""
    if isinstance(ref, str) and not _looks_like_path(ref) and builtin_path(kind, ref) is not None:
        return ref
    target = files.resolved(files.expand_user(ref))
    try:
        rel = os.path.relpath(target, files.resolved(folder))
    except ValueError:  # another drive (Windows)
        return str(target)
    return rel if "/" in rel or "\\" in rel else f"./{rel}"


# --- YAML reading ---------------------------------------------------------------------------------

def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > files.MAX_INT_DIGITS:
        raise InputError(f"integer with {len(text.lstrip('-'))} digits",
                         allowed=f"integers of at most {files.MAX_INT_DIGITS} digits")
    return int(text)


def _json_float(text: str) -> float:
    """A JSON decimal a 64-bit float holds, as YAML's (yamlread.construct_core_float, fuzz34). fuzz36: ``1e999`` was
    read as inf and a nonzero ``1e-999`` as 0, so the refusal quoted a value the file does not hold
    (``train_batch_size: expected a count, got 'inf'``, ``num_hidden_layers: expected an integer, got '0.0'``)."""
    value = float(text)
    refusal = files.float_range_refusal(text, value)
    if refusal:
        raise InputError(refusal, allowed=f"{files.FLOAT_MAGNITUDES} (JSON has no NaN or Infinity)")
    return value


def _json_constant(text: str) -> float:
    raise InputError(f"{text} is not a number", allowed="finite numbers (JSON has no NaN or Infinity)")


class _DuplicateKey(Exception):
    pass


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def load_json(text: str, name: str) -> Any:
    """Strict JSON: integers of bounded length, no NaN/Infinity, no duplicate keys (named with their lines), and
    strings of printable text as YAML's are (:func:`scalemodel.specs.files.refuse_unprintable_strings`)."""
    try:
        data = json.loads(text, parse_int=_json_int, parse_float=_json_float, parse_constant=_json_constant,
                          object_pairs_hook=_json_object)
    except _DuplicateKey as exc:
        key = str(exc.args[0])
        lines = [text.count("\n", 0, m.start()) + 1
                 for m in re.finditer(re.escape(json.dumps(key)) + r"\s*:", text)][:2]
        at = f" (lines {lines[0]} and {lines[1]})" if len(lines) == 2 else ""
        raise InputError(f"duplicate key {key[:100]!r}{at}", where=name, allowed="each key once per object") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg} (column {exc.colno})", where=f"{name}:{exc.lineno}",
                         allowed="strict JSON: double-quoted keys and strings, commas between items, nothing "
                                 "after the document") from None
    except InputError as exc:  # a long integer, NaN/Infinity or 1e999: named at its key and line, as YAML's are
        raise exc.at(_json_place(text, name, exc.what)) from None
    except RecursionError:
        raise InputError("JSON nesting is too deep", where=name, allowed="a config nested a few levels") from None
    files.refuse_unprintable_strings(data, text, name)
    return data


def _json_place(text: str, name: str, what: str) -> str:
    """``name:LINE: KEY`` of the first value :func:`load_json` refused (``what`` says which: a long integer, a
    NaN/Infinity constant or a decimal beyond a float), or ``name`` when it is not found after a key (an array item)."""
    value = (r"-?(?:NaN|Infinity)" if what.endswith(" is not a number")
             else re.escape(what.split(" ", 1)[0]) if "the range of a number" in what
             else rf"-?[0-9]{{{files.MAX_INT_DIGITS + 1},}}")
    m = re.search(r'"((?:[^"\\]|\\.){0,200})"\s*:\s*(' + value + ")", text)
    if m is None:
        return name
    return f"{name}:{text.count(chr(10), 0, m.start(2)) + 1}: {m.group(1)[:100]}"


class Unparsed:
    """The node tree of a file whose document came from the precompiled catalog: composed from its
    text only when an error needs a line number."""

    def __init__(self, text: str, name: str) -> None:
        self.text, self.name = text, name

    def compose(self) -> yaml.Node | None:
        import scalemodel.specs.yamlread as yamlread  # error path only: a query on built-in names never loads yaml
        return yamlread.compose(self.text, self.name)


def read_document(ref: str | os.PathLike[str]) -> tuple[Any, yaml.Node | Unparsed | None]:
    """Parse a YAML or JSON file safely; returns the data and (for YAML) its node tree for line numbers.

    Size limits: :data:`scalemodel.specs.files.MAX_SPEC_BYTES` for YAML,
    :data:`~scalemodel.specs.files.MAX_JSON_BYTES` for JSON (HuggingFace config.json). A file of the
    built-in catalog, unchanged since scripts/build_catalog.py parsed it, is not parsed again.
    """
    path = files.clean(ref)
    if files.suffix(path) == ".json":
        text = files.read_text(path, limit=files.MAX_JSON_BYTES, what="JSON file")
        return load_json(text, str(path)), None
    text = files.read_text(path, limit=files.MAX_SPEC_BYTES, what="spec file")
    stored = precompiled.document(files.name(path), text)
    if stored is not None:
        try:
            return msgspec.json.decode(stored), Unparsed(text, str(path))
        except msgspec.DecodeError:  # a damaged catalog entry (a number JSON holds, a float cannot): parse the YAML
            pass
    import scalemodel.specs.yamlread as yamlread  # files outside the built-in catalog only (PyYAML, ~10 ms)
    return yamlread.load(text, str(path))


def _key_node(mapping: yaml.MappingNode, part: Any) -> tuple[yaml.Node, yaml.Node] | None:
    """(key node, value node) of ``part`` in a mapping node, or None. A key that is not text (:class:`KeyNotText`)
    is found by its value as read, not by its spelling: ``~`` read None, whose str 'None' matched no key and the
    refusal took the line of the mapping (ux34)."""
    for k, v in mapping.value:
        if isinstance(part, KeyNotText):
            if getattr(k, "id", None) == "scalar" and not k.tag.endswith(":str"):
                import scalemodel.specs.yamlread as yamlread  # error path only (a node tree: yaml is loaded)
                value = yamlread.construct(k, "")
                if value == part.value and type(value) is type(part.value):
                    return k, v
        elif getattr(k, "value", None) == str(part):
            return k, v
    return None


def _along(node: yaml.Node | None, loc: Sequence[Any]) -> tuple[int | None, list[Any]]:
    """The line of the value (or the unknown key) ``loc`` names in a node tree, and ``loc`` with each key that is
    not text spelled as the file wrote it (``~``, ``0x10``, ``9.30``)."""
    if node is None:
        return None, list(loc)
    best, spelled = node.start_mark.line + 1, list(loc)
    for i, part in enumerate(loc):
        if getattr(node, "id", None) == "mapping":  # a yaml.MappingNode (yaml itself is imported on demand)
            found = _key_node(node, part)  # type: ignore[arg-type]
            if found is None:
                return best, spelled
            key, node = found
            if isinstance(part, KeyNotText):
                spelled[i] = KeyNotText(part.value, key.value or "(empty)")
                if i == len(loc) - 1:  # the key is what is refused: its own line
                    return key.start_mark.line + 1, spelled
        elif getattr(node, "id", None) == "sequence" and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            return best, spelled
        best = node.start_mark.line + 1
    return best, spelled


# --- extends and overrides -----------------------------------------------------------------------

def _merge(base: Any, over: Any, by: str | None = None) -> Any:
    """Deep-merge ``over`` onto ``base``: dicts merge, lists of named dicts merge by name, else replace. With ``by``
    (the file or scenario entry that ``over`` is), in each mapping merged the ``sources`` citations of what ``over``
    replaced are restated to name it
    (:func:`restate_sources`): a cluster's inline accelerator and each tier merged by name carry their own. A cluster
    extending dgx-h100 with ``tiers: [{name: ib-leaf, bandwidth: 100 Gbit/s}]`` kept the base tier's '400 Gb/s = 50
    GB/s per GPU' as the citation of 12.5 GB/s in ``hardware show``, while ``--set tiers.ib-leaf.bandwidth`` was
    restated (review19e)."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base[k], v, by) if k in base else v
        if by is not None:
            own = over.get("sources")
            restate_sources(out, _changed_paths(over), by, own if isinstance(own, dict) else ())
        return out
    if (isinstance(base, list) and isinstance(over, list) and over
            and all(isinstance(x, dict) and "name" in x for x in base + over)):
        merged = [dict(x) for x in base]
        index = {x["name"]: i for i, x in enumerate(merged)}
        for item in over:
            if item["name"] in index:
                merged[index[item["name"]]] = _merge(merged[index[item["name"]]], item, by)
            else:
                merged.append(item)
        return merged
    return over


def _changed_paths(over: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted paths of the values ``over`` sets (into nested mappings; a list is one value)."""
    out: list[str] = []
    for k, v in over.items():
        if not prefix and k in ("sources", "extends", "kind"):
            continue
        path = f"{prefix}{k}"
        out.extend(_changed_paths(v, path + ".") if isinstance(v, dict) and v else [path])
    return out


def restate_sources(data: dict[str, Any], paths: Iterable[str], by: str, kept: Iterable[str] = ()) -> None:
    """Provenance after ``by`` (a file over the spec it extends, or a ``--set`` item) set ``paths``: a citation of a
    value that was replaced now names ``by``; one that covers a field only partly set says which part. Without this
    a workload extending a config.json with its own ``seq_len: 4096`` kept "max_position_embeddings = 131072" as the
    source of 4096, and the context-length warning fired on the value the user had given."""
    sources = data.get("sources")
    if not isinstance(sources, dict) or not sources:
        return
    sources = data["sources"] = dict(sources)  # a merge's copy may still share the base's mapping
    kept = set(kept)
    for path in paths:
        for key in [k for k in sources if isinstance(k, str) and k not in kept]:
            if key == path or key.startswith(path + "."):
                sources[key] = f"set in {by}"
            elif path.startswith(key + ".") and isinstance(sources[key], str):
                sources[key] = f"{sources[key]}; {path[len(key) + 1:]} set in {by}"


def _restate_along(root: Any, loc: Sequence[Any], by: str) -> None:
    """:func:`restate_sources` in every spec along ``loc`` (a cluster's accelerator has its own ``sources``)."""
    node = root
    for j, part in enumerate(loc):
        rest = loc[j:]
        if isinstance(node, dict) and "sources" not in rest[:1] and all(isinstance(p, str) for p in rest):
            restate_sources(node, [".".join(rest)], by)
        node = node.get(part) if isinstance(node, dict) else (
            node[part] if isinstance(node, list) and isinstance(part, int) and part < len(node) else None)


def _file_of(kind: str, ref: str | os.PathLike[str]) -> str:
    """A str is a name or a path to :func:`resolve`; a path object (``pathlib.Path``) is a file already found."""
    return resolve(kind, ref, None) if isinstance(ref, str) else files.clean(ref)


def load_raw(kind: str, ref: str | os.PathLike[str], *, _nodes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The spec as a plain dict with ``extends:`` resolved (base first, this file on top)."""
    return _read_raw(kind, _file_of(kind, ref), _nodes=_nodes)


def _read_raw(kind: str, path: str, *, _chain: tuple[str, ...] = (),
              _nodes: dict[str, Any] | None = None) -> dict[str, Any]:
    """:func:`load_raw` of a file :func:`resolve` found (a :func:`~scalemodel.specs.files.clean` path)."""
    if kind == "workload" and files.suffix(path) not in (".yaml", ".yml", ".json") and os.path.isdir(path):
        path = _config_in_folder(path, str(path))
    key = files.resolved(path)
    if key in _chain:
        raise InputError(f"extends cycle: {' -> '.join(_chain + (key,))}", where=str(path),
                         allowed="an extends chain that ends in a spec that extends nothing")
    if len(_chain) > MAX_EXTENDS_DEPTH:
        raise InputError("extends chain too long", where=str(path), allowed=f"at most {MAX_EXTENDS_DEPTH}")
    data, node = read_document(path)
    if _nodes is not None and not _chain:
        _nodes["node"], _nodes["path"] = node, path
    if isinstance(data, dict) and files.suffix(path) == ".json" and any(k in data for k in _DEEPSPEED_KEYS):
        raise InputError(f"a DeepSpeed config, not a {kind} spec", where=str(path),
                         allowed="give it with --strategy FILE (it sets ZeRO, batch sizes and precision)")
    if kind == "workload" and isinstance(data, dict) and files.suffix(path) == ".json" and (
            is_hf_config(data) or (files.name(path) == "config.json" and "kind" not in data)):  # {}: name its HF keys
        try:
            data = from_hf_config(data, hf_model_name(path), where=str(path))
        except InputError as exc:
            raise exc.at(str(path)) from None
    if data is None:
        raise InputError("file is empty", where=str(path), allowed=f"{_a(kind)} spec (a YAML mapping)")
    if not isinstance(data, dict):
        raise InputError(f"expected a mapping of fields, got a {type(data).__name__}", where=str(path),
                         allowed=f"{_a(kind)} spec (a YAML mapping)")
    _anchor_accelerator(kind, data, path)
    if kind == "cluster" and isinstance(data.get("accelerator"), dict) and "extends" in data["accelerator"]:
        # fuzz26b: as a scenario's cluster takes it (_load_scenario_spec); a cluster file's was "unknown key 'extends'"
        data["accelerator"] = derived("accelerator", data["accelerator"], by=f"{path}: accelerator",
                                      relative_to=files.parent(path))
    parent = data.pop("extends", None)
    if parent is not None:
        if not isinstance(parent, str):
            raise InputError(f"extends must be a name or a path, got {type(parent).__name__}", where=f"{path}: extends",
                             allowed=f"a built-in {kind} name or a path to a YAML file")
        try:
            base_path = resolve(kind, parent, files.parent(path))
        except InputError as exc:
            raise exc.at(f"{path}: extends") from None
        try:
            base = _read_raw(kind, base_path, _chain=_chain + (key,))
        except InputError as exc:  # the base file itself unreadable (a device, not UTF-8): say who named it
            raise (exc.at(f"{path}: extends") if exc.where == str(base_path) else exc) from None
        data = _over(base, data, parent, by=str(path), where=f"{path}: extends", what="this file")
    return data


def _over(base: dict[str, Any], data: dict[str, Any], parent: str, *, by: str, where: str, what: str,
          expected: tuple[str, ...] = ()) -> dict[str, Any]:
    """``data`` (a file, a scenario's inline spec or a dict given to the Python API, named ``by``) merged over
    ``base``, the spec its ``extends: parent`` names: one route for every way of deriving a spec, so that each
    restates the citations of the values it sets (:func:`_merge` with ``by``) and refuses a base of another kind:
    another than ``data``'s ``kind:``, or, where ``data`` states none, than the ``expected`` kinds (a mapping's place
    says what it is: the API's cluster argument, a scenario's ``cluster:``)."""
    theirs = base.get("kind")
    mine = data["kind"][:40] if isinstance(data.get("kind"), str) else " or ".join(expected)
    if isinstance(theirs, str) and mine and theirs not in (
            (data["kind"],) if isinstance(data.get("kind"), str) else expected):
        # a cluster extending a transformer file was merged field by field and refused as "unknown key 'layers'"
        raise InputError(f"{parent[:200]!r} is a {theirs[:40]} spec, {what} a {mine} spec",
                         where=where, allowed=f"a {mine} spec to derive from")
    acc, theirs_acc = data.get("accelerator"), base.get("accelerator")
    if isinstance(acc, dict) and isinstance(theirs_acc, str) and not {"name", "extends"} & set(acc):
        # fuzz26b: a cluster extending dgx-h100 with `accelerator: {collective_units_nvls: 8}` replaced h100-sxm by
        # the one field and was refused as "accelerator.name: missing required field; add it", where adding it asks
        # for every field of an accelerator
        shown = os.path.basename(theirs_acc).removesuffix(".yaml")
        raise InputError(f"a mapping without name or extends replaces the accelerator {shown[:200]!r} of "
                         f"{parent[:200]!r} whole, not some of its fields", where=f"{by}: accelerator",
                         allowed=f"accelerator: {{extends: {shown[:200]}, ...}} to change some of its fields "
                                 "(or --set cluster.accelerator.FIELD=VALUE), or a whole accelerator spec")
    return _without_inherited_count(base, data, _merge(base, data, by))


#: Transformer workload fields that leave its parameter count as it was (engine.job.warn_published_params checks
#: ``params`` against the count the shape gives, without MTP modules)
_COUNT_NEUTRAL = frozenset({"name", "description", "sources", "kind", "seq_len", "dropout", "causal", "squared_relu",
                            "sliding_window", "sliding_window_pattern", "mtp_layers", "mtp_shared"})


def _without_inherited_count(base: dict[str, Any], data: dict[str, Any], merged: Any) -> Any:
    """``merged`` without the ``params`` (and its citation) a transformer inherited from the spec it extends, where
    it reshapes that spec and states no count of its own: the count is the base's, another model's. review21i: a
    file ``extends: llama3-8b`` with ``layers: 16`` kept llama3-8b's 8.03e9, which the round-21 check then warned
    of as "not the 4.54e+09 parameters the model's shape gives", as a ``--set model.layers`` no longer is."""
    if ("layers" not in base or "params" in data or not isinstance(merged, dict) or "params" not in merged
            or all(k in _COUNT_NEUTRAL for k in data)):
        return merged
    out = {k: v for k, v in merged.items() if k != "params"}
    if isinstance(out.get("sources"), dict):
        out["sources"] = {k: v for k, v in out["sources"].items() if k != "params"}
    return out


def derived(kind: str, data: dict[str, Any], *, by: str, relative_to: str | None = None) -> dict[str, Any]:
    """A mapping of ``kind`` fields with ``extends: BASE`` (a scenario's ``cluster:``, a dict given to the Python
    API), named ``by`` in errors and in the citations it restates -> the spec BASE names (resolved against
    ``relative_to``) with the mapping's fields on top, as a file's ``extends:`` gives (:func:`_over`); a mapping
    without ``extends:`` as it is."""
    if "extends" not in data:
        return data
    rest = dict(data)
    parent = rest.pop("extends")
    if not isinstance(parent, str):
        raise InputError(f"extends must be a name or a path, got {type(parent).__name__}", where=f"{by}: extends",
                         allowed=f"a built-in {kind} name or a path to a YAML file")
    try:
        base = _read_raw(kind, resolve(kind, parent, relative_to))
    except InputError as exc:
        raise exc.at(by) from None
    return _over(base, rest, parent, by=by, where=f"{by}: extends", what="this mapping", expected=kinds_of(kind))


def _anchor_accelerator(kind: str, data: dict[str, Any], path: str) -> None:
    """A cluster file's ``accelerator:`` path, relative to the cluster file's folder, as ``extends:`` and a
    scenario's references are: it was read (at validation, by :func:`~scalemodel.specs.base.builtin_ref`) relative to
    the working folder, so ``-c sub/c.yaml`` naming ``accelerator: acc.yaml`` beside it was "file not found", or
    took another acc.yaml in the working folder without a word (round 15). A built-in name stays a name."""
    ref = data.get("accelerator") if kind == "cluster" else None
    if isinstance(ref, str) and _looks_like_path(ref):
        p = files.expand_user(ref)
        if not p.startswith("/"):
            # absolute: a scenario resolves it once more; named in messages as given (_ANCHORED)
            given = files.join(files.parent(path), p)
            data["accelerator"] = os.path.abspath(given)
            _ANCHORED[data["accelerator"]] = given


#: Each accelerator path :func:`_anchor_accelerator` made absolute -> the path as given (the cluster file's path, as
#: given, joined with the file's ``accelerator:``), which names the file in messages (:func:`_load_reference`,
#: :func:`_refuse_named_alone`, :func:`_expand_ref`). ux38b: ``-c sub/c.yaml`` naming ``accelerator: a.yaml`` was
#: refused at "/home/.../sub/a.yaml:3: memory" (and "file not found: /home/.../sub/nope.yaml") where a scenario's
#: cluster file or an extends base is named "sub/c2.yaml:3". Both name one file: the working folder does not change.
_ANCHORED: dict[str, str] = {}


def _as_given(ref: str) -> str | None:
    """The path as given of an accelerator path :func:`_anchor_accelerator` made absolute, where it still names that
    file from the working folder (a process that changed folder since reads the absolute path); else None."""
    given = _ANCHORED.get(ref)
    return given if given is not None and os.path.abspath(given) == ref else None


def _load_reference(kind: str, ref: str) -> dict[str, Any]:
    """:func:`load_raw` for a spec a spec names (base.builtin_ref), an anchored accelerator path read as given."""
    return load_raw(kind, _as_given(ref) or ref)


def _joined_release_keys(parts: list[str]) -> list[str]:
    """A ``--set`` path's parts with each pair of all-digit parts after ``attention_releases`` joined back into the
    major.minor key it was split from: ``accelerator.attention_releases.9.19.cudnn.fwd.attn_max=0.5`` set the key
    '9', refused as "key '9' is not of the allowed form" though 9.19 was written (round 15)."""
    out: list[str] = []
    i = 0
    while i < len(parts):
        part = parts[i]
        if (out and out[-1].strip() == "attention_releases" and i + 1 < len(parts)
                and all(p.strip().isascii() and p.strip().isdigit() for p in (part, parts[i + 1]))):
            out.append(f"{part.strip()}.{parts[i + 1].strip()}")
            i += 2
            continue
        out.append(part)
        i += 1
    return out


def _parse_value(text: str, where: str) -> Any:
    """A --set value as YAML (1.2 core schema); text that is not valid YAML stays a string."""
    if len(text) > MAX_SET_VALUE_CHARS:
        raise InputError(f"value is {len(text)} characters long", where=where,
                         allowed=f"a value of at most {MAX_SET_VALUE_CHARS} characters")
    if not text.strip():
        return ""
    bad = next((c for c in text if "\ud800" <= c <= "\udfff"), None)
    if bad is not None:  # a byte not UTF-8 in the shell's argument (os.fsdecode's surrogateescape): PyYAML's
        # UTF-8 encoder raised UnicodeEncodeError, a traceback
        raise InputError(f"the value has a byte that is not UTF-8 ({shown(bad)})", where=where,
                         allowed="a value in UTF-8 text")
    import scalemodel.specs.yamlread as yamlread  # --set values only (PyYAML, ~10 ms)
    try:
        return yamlread.load(text, where)[0]
    except yamlread.MalformedYAML:
        return text


class Override(str):
    """One ``--set`` item routed to one spec, its root cut off (``layers=12`` for ``model.layers=12``): ``shown`` is
    the path as it was given, which errors name."""

    shown: str

    def __new__(cls, text: str, shown: str) -> Override:
        item = super().__new__(cls, text)
        item.shown = shown
        return item


#: The fields ``--set`` items wrote: (path in the spec's raw data, the item's path as given), for error lines.
Touched = list[tuple[tuple[Any, ...], str]]

#: Where a spec file may write ``extends:``, by the kind of spec ``--set`` items apply to and the place in it: the kind
#: of spec there, and the option that names another one at the top (None: the file's own field names it).
_EXTENDS_AT: dict[tuple[str, tuple[str, ...]], tuple[str, str | None]] = {
    ("cluster", ()): ("cluster", "--cluster"), ("cluster", ("accelerator",)): ("accelerator", None),
    ("workload", ()): ("workload", "--model"), ("accelerator", ()): ("accelerator", None),
    ("scenario", ()): ("scenario", None), ("scenario", ("cluster",)): ("cluster", None),
    ("scenario", ("model",)): ("workload", None), ("scenario", ("cluster", "accelerator")): ("accelerator", None)}


def _extends_refusal(kind: str, loc: Sequence[Any], path: str) -> InputError | None:
    """``--set ...extends=X`` where a file may write ``extends:``: the spec it extends was read and merged before any
    ``--set`` applies, so the item was "unknown key 'extends'" (fuzz28), which said neither why nor what to write."""
    at = _EXTENDS_AT.get((kind, tuple(loc)))
    if at is None:
        return None
    spec, option = at
    parent = path.rpartition(".")[0] if "." in path else ""
    if parent.split(".")[0] == "accelerator" and kind == "cluster":  # --set accelerator.X is cluster.accelerator.X
        parent = "cluster." + parent
    if option is not None or not parent:  # the command's own spec: another is named where this one is
        whole = f"{option} NAME or FILE" if option else f"its file given instead of this {spec}'s"
        fields = f"--set {parent}.<field>=VALUE" if parent else "--set <field>=VALUE"
    else:
        whole, fields = f"--set {parent}=NAME or FILE", f"--set {parent}.<field>=VALUE"
    return InputError(f"extends is resolved when the {spec} is read, before any --set applies: it cannot be set",
                      where=f"--set {path}",
                      allowed=f"another {spec}: {whole} (a YAML file may itself write extends: NAME and the fields it "
                              f"changes); one field: {fields}")


def _is_index(part: str) -> bool:
    """A ``--set`` path part that indexes a list: ASCII digits ('²'.isdigit() is true; int() refuses it)."""
    return part.isascii() and part.isdigit() and len(part) < 10


def _index_refusal(field: str, index: str, path: str, state: str) -> InputError:
    """``--set FIELD.N=X`` where FIELD holds no list items to index (not given, or empty): how a list is written."""
    return InputError(f"{field} {state}, so it has no item {index} to set", where=f"--set {path}",
                      allowed=f"the whole list, --set {field}=[a,b] (a YAML list; [] for none); an index sets an item "
                              "of a list that has it")


#: A ``--set`` path part that indexes a list with brackets, as jq or Python would ('tiers[0]', 'stage_layers[-1]'); a
#: pattern text, compiled by ``re`` where first used (a query without ``--set`` never is; latency37)
_BRACKETED = r"([^\[\]]+)\[([^\[\]]*)\](?:\[[^\[\]]*\])*"


def _bracket_refusal(path: str, part: str, field: str, index: str) -> InputError:
    """fuzz33: ``--set cluster.tiers[0].latency=..`` was "unknown key 'tiers[0]'; did you mean 'tiers'?", which
    says neither that brackets do not index here nor how an item is written (after a dot: its index or its name)."""
    item = index if _is_index(index) or re.fullmatch(r"[A-Za-z_][\w-]*", index) else "0"
    fixed = path.replace(part, f"{field}.{item}", 1)
    return InputError(f"{part!r}: brackets do not index a list in a --set path", where=f"--set {path}",
                      allowed=f"the item after a dot, its index from 0 or its name: {fixed}")


def _is_list_at(model: Any, loc: Sequence[Any], data: Any) -> bool:
    """Whether the field at ``loc`` of ``model`` (its spec class; None: not known) is declared a list."""
    t = type_at(model, loc, data) if model is not None else None
    for _ in range(5):  # through Annotated and Optional
        if typing.get_origin(t) is typing.Annotated:
            t = typing.get_args(t)[0]
        elif isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union:
            t = next((a for a in typing.get_args(t) if a is not type(None)), None)
    return typing.get_origin(t) is list


def apply_overrides(raw: dict[str, Any], overrides: Iterable[str], *, kind: str = "",
                    touched: Touched | None = None, model: Any = None) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides. List items are addressed by index or by their ``name``. ``touched``
    collects where each item wrote, so that a refusal of its value names the ``--set`` item, not the file. ``model``
    (the spec class the result is validated as) tells a list not given, whose index is refused with how a list is
    written, from a mapping."""
    out = copy.deepcopy(raw)
    for item in overrides:
        if "=" not in item:
            raise InputError(f"override {item!r} has no '='", where="--set", allowed="path.to.field=value")
        path, value = item.split("=", 1)
        path = getattr(item, "shown", path).strip()
        parts = item.split("=", 1)[0].strip().split(".")
        loc: list[Any] = []
        if len(parts) > files.MAX_DEPTH:
            raise InputError(f"override path has {len(parts)} parts", where="--set",
                             allowed=f"a path of at most {files.MAX_DEPTH} parts")
        if not "".join(parts).strip():
            raise InputError(f"override {item!r} has an empty path", where="--set", allowed="path.to.field=value")
        if not all(p.strip() for p in parts):  # 'a..b', '.a', 'a.': an empty part was dropped, so the value landed
            raise InputError(  # elsewhere than written (split_overrides took 'training.' as the root of '.precision')
                "the path has an empty part (two dots in a row, or a dot at its start or end)", where=f"--set {path}",
                allowed="path.to.field=value, a field name between every two dots")
        node: Any = out
        parts = _joined_release_keys(parts)
        created: tuple[Any, ...] | None = None  # the outermost mapping this item made (nothing of a file's is in it)
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if isinstance(node, dict):
                if part == "accelerator" and kind == "cluster" and isinstance(node.get(part), str) and not last:
                    node[part] = load_raw("accelerator", node[part])
                if part == "extends" and last and (refusal := _extends_refusal(kind, loc, path)) is not None:
                    raise refusal
                if part not in node and (m := re.fullmatch(_BRACKETED, part)) is not None and (
                        isinstance(node.get(m.group(1)), list) or _is_list_at(model, [*loc, m.group(1)], out)):
                    raise _bracket_refusal(path, part, m.group(1), m.group(2))
                loc.append(part)
                if last:
                    node[part] = _parse_value(value, f"--set {path}")
                else:
                    if part not in node and _is_index(parts[i + 1]) and _is_list_at(model, loc, out):
                        # a list not given ('strategy.offload_tensors.0=X') was made a mapping {'0': 'X'}, refused as
                        # "Input should be a valid list (got {'0': 'X'})" (fuzz30): an index sets an item of a list
                        raise _index_refusal(path.rsplit(".", len(parts) - i - 1)[0], parts[i + 1], path, "is not set")
                    if part not in node and created is None:
                        created = tuple(loc)
                    node = node.setdefault(part, {})
            elif isinstance(node, list):
                idx = int(part) if _is_index(part) else next(
                    (j for j, x in enumerate(node) if isinstance(x, dict) and x.get("name") == part), None)
                if not node and idx is not None:  # an empty list has no item to set: the whole list is written
                    raise _index_refusal(path.rsplit(".", len(parts) - i)[0], part, path, "is empty")
                if idx is None or idx >= len(node):
                    names = [str(x.get("name")) for x in node if isinstance(x, dict)]
                    raise InputError(f"no item {part!r} in {'.'.join(parts[:i])}", where=f"--set {path}",
                                     allowed=f"an index below {len(node)} or a name: {', '.join(names)}")
                loc.append(idx)
                if last:
                    node[idx] = _parse_value(value, f"--set {path}")
                else:
                    node = node[idx]
            elif node is None:  # an optional group not given (moe: null): its fields cannot be set one by one
                group = path.rsplit(".", len(parts) - i)[0]
                raise InputError(f"{'.'.join(parts[:i])} is not set, so it has no fields to set one by one",
                                 where=f"--set {path}", allowed=f"set the whole group, e.g. --set {group}={{...}}")
            else:
                raise InputError(f"{'.'.join(parts[:i])} is a value, not a group of fields",
                                 where=f"--set {path}", allowed="a path to an existing field")
        _restate_along(out, loc, f"--set {path}")
        if touched is not None:
            touched.append((tuple(loc), path))
            if created is not None:
                # round 16: a field missing under a group the item made ("--set accelerator.attention_releases.9.99.
                # cudnn.fwd.attn_max=0.5", a new release) was refused at the cluster file's line, which has no 9.99
                touched.append((created, path))
    return out


# --- validation ----------------------------------------------------------------------------------


def _spec_classes(t: Any) -> list[Any]:
    """The spec classes a field type holds (through Optional, lists, dicts and Annotated)."""
    cands = [t]
    for _ in range(5):
        nxt: list[Any] = []
        for c in cands:
            args = typing.get_args(c)
            nxt.extend(args if args else [c])
        cands = nxt
    return [c for c in cands if isinstance(c, type) and issubclass(c, Spec)]


def _spec_at(model: Any, loc: Sequence[Any], data: Any) -> Any:
    """The spec class at ``loc`` (for an unknown key's hint), or None; ``data`` (the raw fields) picks the member
    of a union of tagged specs by its ``kind``."""
    t = type_at(model, loc, data)
    for part in loc:
        data = data.get(part) if isinstance(data, dict) else (
            data[part] if isinstance(data, list) and isinstance(part, int) and part < len(data) else None)
    return _pick(_spec_classes(t), data) if t is not None else None


#: The most known keys an unknown key's error lists (StrategySpec has over 60: the line ran to 1,200 characters).
KNOWN_KEYS_SHOWN = 12
#: The `scalemodel schema` kind that documents each top-level spec's fields (a strategy's and a training's are a
#: scenario's sections).
_SCHEMA_KINDS = {"ClusterSpec": "cluster", "AcceleratorSpec": "accelerator", "TransformerWorkload": "workload",
                 "GenericWorkload": "workload", "ScenarioSpec": "scenario", "SweepSpec": "sweep",
                 "StrategySpec": "scenario", "TrainingSpec": "scenario"}


def _known_keys_text(known: list[str], cls: Any, model: Any) -> str:
    """``known keys: a, b, ...`` for an unknown key's error in spec ``cls`` (within ``model``): the first
    :data:`KNOWN_KEYS_SHOWN`, then how many more and the `scalemodel schema` kind that lists them all (``cls``'s own,
    else the top-level spec's: a tier's fields are in the cluster schema)."""
    if len(known) <= KNOWN_KEYS_SHOWN:
        return f"known keys: {', '.join(known)}" if known else ""
    top = typing.get_args(model)[0] if typing.get_args(model) else model  # Annotated[Union, ...]: the union
    names = [getattr(c, "__name__", "") for c in (cls, *(typing.get_args(top) or (top,)))]
    kind = next((_SCHEMA_KINDS[n] for n in names if n in _SCHEMA_KINDS), None)
    return (f"known keys: {', '.join(known[:KNOWN_KEYS_SHOWN])} and {len(known) - KNOWN_KEYS_SHOWN} more; see "
            f"`scalemodel schema {kind or '<kind>'}`")


def _pick(cands: list[Any], data: Any) -> Any:
    if len(cands) > 1 and isinstance(data, dict):
        tagged = [c for c in cands if c.__struct_config__.tag == data.get("kind")]  # type: ignore[attr-defined]
        if not tagged and "kind" not in data:
            tagged = [c for c in cands if c.__struct_config__.tag == ("transformer" if "layers" in data  # type: ignore[attr-defined]
                                                                       else "generic")]
        cands = tagged or cands
    return cands[0] if cands else None


def _set_items(loc: Sequence[Any], touched: Touched) -> tuple[str, bool]:
    """The ``--set`` items behind a refusal at ``loc``: the one that wrote the value there (or the mapping or list
    holding it), else those that wrote inside the group at ``loc`` (a rule across its fields); and whether the
    refused value lies deeper than what the item wrote (its field path is then worth naming)."""
    over = [t for t in touched if tuple(loc[:len(t[0])]) == t[0]]
    if over:
        best = max(over, key=lambda t: len(t[0]))
        return f"--set {best[1]}", len(loc) > len(best[0])
    under = list(dict.fromkeys(shown for at, shown in touched if at[:len(loc)] == tuple(loc)))
    return (", ".join(f"--set {shown}" for shown in under), True) if under else ("", False)


def _spec_classes_only(t: Any, kind: str) -> bool:
    """Whether ``t`` is a spec (or optional spec) refused by one of its cross-field rules (``kind`` value): its rule's
    message says what is wrong, and the list of its fields would not say what is allowed."""
    return kind == "value" and bool(_spec_classes(t)) and all(
        _spec_classes(a) for a in (typing.get_args(t) or (t,)) if a is not type(None))


#: The section that holds a field a strategy or training mapping has not (fuzz26b: ``--set training.recompute=none``
#: was "unknown key 'recompute'" with 12 training keys listed and no word that recompute is a strategy field).
#: By class name: importing specs.training here would load it for every cluster-only query (`collective`); where
#: the refusing spec is one of the two, its module is loaded already.
_OTHER_SECTION = {"TrainingSpec": ("strategy", "StrategySpec"), "StrategySpec": ("training", "TrainingSpec")}


def _other_section_field(cls: Any, key: Any) -> str | None:
    """The other section (``strategy`` or ``training``) when ``key`` is one of its fields and not ``cls``'s; ``cls``
    may extend one of the two (a sweep's strategy, SweepStrategy: ``strategies: [{precision: fp4}]`` was "did you
    mean 'compression'?", fuzz29)."""
    base = next((b for b in getattr(cls, "__mro__", ()) if b.__name__ in _OTHER_SECTION), None)
    if base is None:
        return None
    other = _OTHER_SECTION[base.__name__]
    other_cls = getattr(sys.modules.get(base.__module__), other[1], None)
    return other[0] if key in getattr(other_cls, "model_fields", ()) else None


def validation_error(exc: SpecError, model: Any, path: str | os.PathLike[str] | None, node: yaml.Node | Unparsed | None,
                     prefix: Sequence[Any] = (), data: Any = None, touched: Touched | None = None) -> InputError:
    """A spec's refusal as one :class:`InputError`: file:line (or the ``--set`` item that wrote the value), the
    field's path, what, what is allowed."""
    loc = list(exc.loc)
    msg, allowed = exc.what, exc.allowed
    line = None
    if path is not None and node is not None:
        line, spelled = _along(node.compose() if isinstance(node, Unparsed) else node, loc)
        if loc and isinstance(loc[-1], KeyNotText) and msg == loc[-1].refusal():  # the key as the file spells it
            msg = spelled[-1].refusal()
        loc = spelled
    full = list(prefix) + loc
    if exc.kind == "unknown":
        cls = _spec_at(model, loc[:-1], data)
        known = list(cls.model_fields) if cls is not None else []
        import difflib  # error path only: a query never loads difflib
        near = difflib.get_close_matches(str(loc[-1]), known, n=1)
        other = _other_section_field(cls, loc[-1])  # an exact field there beats a near one here
        if isinstance(loc[-1], KeyNotText):  # a field's name is text (the refusal says what it is)
            allowed = "keys are text; " + _known_keys_text(known, cls, model)
        elif other is not None:  # where it goes: a sweep has no strategy: section, its strategies: entries take it
            place = f"{other}.{loc[-1]}" if other == "training" or getattr(model, "__name__", "") != "SweepSpec" \
                else f"an entry of strategies: [{{{loc[-1]}: ...}}]"
            allowed = f"{loc[-1]} is a {other} field ({place}); " + _known_keys_text(known, cls, model)
        else:
            allowed = (f"did you mean {near[0]!r}? " if near else "") + _known_keys_text(known, cls, model)
    elif exc.kind == "missing":
        allowed = "add it (see `scalemodel schema` for every field)"
    elif exc.kind == "type" and exc.value is not _NO_VALUE:
        # shown to 80 characters: a 300-character word in a boolean field (fuzz39, check_for_nan_in_loss) filled
        # the 300 characters InputError keeps of a what, and the field's type (the allowed) was cut off
        got = written(exc.value)
        msg = f"{msg} (got {got if len(got) <= 80 else got[:77] + '...'})"
    elif exc.kind == "value" and not allowed and "; " in msg:
        # a rule's own "what; allowed" text: kept apart so that InputError cuts a long echoed value from the
        # what, never the allowed (a 400-character tier name left "...nnn..." and no rule)
        msg, _, allowed = msg.rpartition("; ")
    if not allowed and loc and not (exc.kind == "value" and "; " in msg):  # say what the field takes (type, range)
        t = type_at(model, loc, data)
        if t is not None and not _spec_classes_only(t, exc.kind):
            allowed = allowed_for(t)
    where = loc_text(full)
    items, deeper = _set_items(loc, touched) if touched else ("", False)
    also = list(exc.also)
    if touched and not items and also:  # a rule across two fields, the other one written by --set
        items, _ = _set_items(also, touched)
        # the refused field named once, here (fuzz27: a --set inside the group was "max_gpus: max_gpus: ...")
        msg, deeper = (f"{where}: {msg}" if items else msg), False
    if items:  # the value came from the command line: the file's line would point at a value that is fine
        return InputError(msg, where=items + (f": {where}" if deeper and full else ""), allowed=allowed,
                          also=exc.also, needs_zero=exc.needs_zero, needs_recompute=exc.needs_recompute)
    if path is not None:
        where = f"{path}:{line}: {where}" if line else f"{path}: {where}"
    return InputError(msg, where=where, allowed=allowed, also=exc.also, needs_zero=exc.needs_zero,
                      needs_recompute=exc.needs_recompute)


M = TypeVar("M")


def validate(model: Any, data: dict[str, Any], *, path: str | os.PathLike[str] | None = None,
             node: yaml.Node | Unparsed | None = None,
             prefix: Sequence[Any] = (), touched: Touched | None = None) -> Any:
    try:
        return convert(model, data)
    except SpecError as exc:
        # raw fields as written (a file, the command line): a zero they write is not the default (fuzz40); a spec
        # built in Python (set_refusal below) holds every field, so it cannot tell and keeps the refusal as it is
        if exc.needs_zero and (given := written_zero_refusal(exc.what, exc.allowed, data, exc.loc)) is not None:
            exc = SpecError(given[0], exc.loc, kind=exc.kind, allowed=given[1], value=exc.value, also=exc.also,
                            needs_zero=given[2], needs_recompute=exc.needs_recompute)
        raise validation_error(exc, model, path, node, prefix, data, touched) from None
    except InputError as exc:
        raise exc.at(str(path)) if path is not None else exc from None


def _yaml_checked(load: Callable[[], M]) -> M:
    """``load()``; when it fails on a spec some of whose files came from the precompiled catalog, it runs again
    with every file parsed from its YAML. A genuine error is then raised as the YAML gives it (same text, same
    line); when the YAML loads, the catalog's entry is what is wrong (damaged, yet decodable): that is said,
    naming catalog.json rather than a line of a valid YAML file."""
    try:
        with precompiled.recorded() as served:
            return load()
    except InputError as exc:
        if not served:
            raise
        with precompiled.bypassed():
            load()  # the YAML's own error, if it has one
        import scalemodel.specs.yamlread as yamlread  # error path only (PyYAML)
        damaged = sorted({name for name, text in served if _stored_differs(name, text, yamlread.load(text, name)[0])})
        field = exc.where.rsplit(": ", 1)[-1] if ": " in exc.where else exc.where
        names = ", ".join(damaged or sorted({name for name, _text in served}))
        raise InputError(f"the stored document of {names} fails validation ({field}: "
                         f"{exc.what}) though the YAML itself is valid: the catalog entry is damaged",
                         where=str(precompiled.DATA), allowed="re-run scripts/build_catalog.py, or delete the file "
                                                              "(every spec is then parsed from its YAML)") from None


def _stored_differs(name: str, text: str, parsed: Any) -> bool:
    """Whether the catalog's document of ``name`` holding ``text`` differs from the YAML's ``parsed`` one."""
    def typed(v: Any) -> Any:  # 1 and 1.0, True and 1 differ
        if isinstance(v, dict):
            return {k: typed(x) for k, x in v.items()}
        return [typed(x) for x in v] if isinstance(v, list) else (type(v).__name__, v)
    stored = precompiled.document(name, text)
    try:
        return stored is not None and typed(msgspec.json.decode(stored)) != typed(parsed)
    except msgspec.DecodeError:
        return True


def kinds_of(kind: str) -> tuple[str, ...]:
    """The ``kind:`` values a spec of ``kind`` states: a workload is a transformer or a generic one."""
    return {"workload": ("transformer", "generic")}.get(kind, (kind,))


def load_spec(kind: str, ref: str | os.PathLike[str], model: Any, overrides: Iterable[str] = ()) -> Any:
    return _yaml_checked(lambda: _load_spec(kind, ref, model, overrides))


def _a(kind: str) -> str:
    """``kind`` with its article: "an accelerator", "a cluster" ("a accelerator spec", fuzz29)."""
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"


def _load_spec(kind: str, ref: str | os.PathLike[str], model: Any, overrides: Iterable[str] = ()) -> Any:
    nodes: dict[str, Any] = {}
    raw = load_raw(kind, ref, _nodes=nodes)
    declared = raw.get("kind")
    expected = kinds_of(kind)
    if declared is not None and declared not in expected:
        raise InputError(f"this file is a {declared!r} spec", where=f"{nodes.get('path')}: kind",
                         allowed=f"{_a(kind)} spec (kind: {' or '.join(expected)})")
    touched: Touched = []
    named: list[tuple[tuple[str, ...], str, str]] = [(("accelerator",), "accelerator", raw["accelerator"])] if (
        kind == "cluster" and isinstance(raw.get("accelerator"), str)) else []
    raw = apply_overrides(raw, overrides, kind=kind, touched=touched, model=model)
    try:
        return validate(model, raw, path=nodes.get("path"), node=nodes.get("node"), touched=touched)
    except InputError as exc:
        # a cluster's accelerator file (accelerator: a.yaml), refused in its own file and line (fuzz38: a.yaml's
        # memory: -80 GB was "c.yaml:3: accelerator.memory", the cluster's line naming the file)
        _refuse_named_alone(model, named, files.parent(str(nodes.get("path") or ".")), overrides, exc)
        if nodes.get("path") is not None:
            _refuse_in_base(kind, model, str(nodes["path"]), exc)
        raise


def _refuse_in_base(kind: str, model: Any, path: str, refusal: InputError) -> None:
    """A file refused for a field it does not write itself but inherits by ``extends: base.yaml``: the base's own
    refusal of the same field, naming the base file and its line (fuzz38: ``host_memory: -5 TB`` in c.yaml, extended
    by d.yaml, was "d.yaml:1: host_memory", d.yaml's extends line). Only where the base, read alone, refuses that
    field with the same words; otherwise the first refusal stands."""
    field = refusal.where.split(": ", 1)[-1] if ": " in refusal.where else ""
    top = re.split(r"[.\[]", field, maxsplit=1)[0]
    try:
        data, _node = read_document(path)
    except InputError:
        return
    if not top or not isinstance(data, dict) or top in data or not isinstance(data.get("extends"), str):
        return
    try:
        base = resolve(kind, data["extends"], files.parent(path))
    except InputError:
        return
    try:
        load_spec(kind, base, model)
    except InputError as exc:
        if exc.what == refusal.what and ": " in exc.where and exc.where.split(": ", 1)[-1] == field:
            raise exc from None


def _expand_ref(value: Any, kind: str, base_dir: str, where: str, origin: str) -> Any:
    """A name/path (or a mapping with ``extends:``) inside a scenario -> the referenced spec's raw dict."""
    try:
        if isinstance(value, str):  # a cluster file's accelerator, anchored: read (and named) as given
            given = _as_given(value)
            return _read_raw(kind, resolve(kind, given or value, None if given else base_dir))
    except InputError as exc:
        raise exc.at(f"{origin}: {where}") from None
    if isinstance(value, dict):
        return derived(kind, value, by=f"{origin}: {where}", relative_to=base_dir)
    return value


def load_scenario_spec(ref: str | os.PathLike[str], model: Any, overrides: Iterable[str] = ()) -> tuple[Any, str]:
    """Read a scenario: built-in names and relative paths inside it resolve against its folder,
    ``cluster: {extends: NAME, ...}`` (likewise ``model:`` and the cluster's ``accelerator:``) derives
    from another spec, and ``--set`` paths are relative to the scenario (``cluster.price_per_gpu_hour=2.5USD/h``,
    ``training.global_batch=512``, ``gpus=[128,256]``)."""
    return _yaml_checked(lambda: _load_scenario_spec(ref, model, overrides))


def _load_scenario_spec(ref: str | os.PathLike[str], model: Any, overrides: Iterable[str] = ()) -> tuple[Any, str]:
    path = _file_of("scenario", ref)
    nodes: dict[str, Any] = {}
    raw = _read_raw("scenario", path, _nodes=nodes)
    declared = raw.get("kind")
    if declared is not None and declared != "scenario":
        raise InputError(f"this file is a {declared!r} spec", where=f"{path}: kind",
                         allowed="a scenario (kind: scenario)")
    named: list[tuple[tuple[str, ...], str, str]] = []  # (where, kind, file) of each spec the scenario names
    for key, kind in (("cluster", "cluster"), ("model", "workload")):
        if key in raw:  # a missing one stays missing: a None put here was "Input should be a valid mapping (got None)"
            if isinstance(raw[key], str):
                named.append(((key,), kind, raw[key]))
            raw[key] = _expand_ref(raw[key], kind, files.parent(path), key, path)
    cluster = raw.get("cluster")
    if isinstance(cluster, dict):
        if isinstance(cluster.get("accelerator"), str) and ("cluster",) not in [n[0] for n in named]:
            named.append((("cluster", "accelerator"), "accelerator", cluster["accelerator"]))
        cluster["accelerator"] = _expand_ref(cluster.get("accelerator"), "accelerator", files.parent(path),
                                             "cluster.accelerator", path)
    touched: Touched = []
    raw = apply_overrides(raw, overrides, kind="scenario", touched=touched, model=model)
    try:
        return validate(model, raw, path=path, node=nodes.get("node"), touched=touched), path
    except InputError as exc:
        _refuse_named_alone(model, named, files.parent(path), overrides, exc)
        raise


def _refuse_named_alone(model: Any, named: list[tuple[tuple[str, ...], str, str]], folder: str,
                        overrides: Iterable[str], refusal: InputError) -> None:
    """A scenario (or a cluster naming its accelerator) refused: each spec file it names (``cluster: c.yaml``,
    ``model: m.yaml``, ``accelerator: a.yaml``) validated alone, as ``-c c.yaml`` reads it, so that a value refused in
    that file is named there (fuzz38: ``host_memory: -5 TB`` in c.yaml was "s.yaml:4: cluster.host_memory", a line
    of the scenario without the field; sweep and calibrate runs named c.yaml:3). A spec a ``--set`` item writes into
    is left to the first refusal (the item is named), and so is a ``refusal`` that names the file already (one
    reading it: "c.yaml:3: accelerator: a.yaml: file is empty")."""
    sets = [str(o).split("=", 1)[0] for o in overrides]
    said = f"{refusal.where}: {refusal.what}"
    for where, kind, ref in named:
        prefix = ".".join(where)
        if any(s == prefix or s.startswith(prefix + ".") for s in sets):
            continue
        t = type_at(model, where)
        try:
            given = _as_given(ref)
            file = resolve(kind, given or ref, None if given else folder)
        except InputError:  # not found, a folder, ...: the first refusal says so where it names the reference
            continue
        if t is not None and file not in said and ref not in said:
            load_spec(kind, file, t)


set_reference_loader(_load_reference)  # a spec naming another (cluster -> accelerator, scenario -> cluster) loads here
set_refusal(lambda exc, model, data: validation_error(exc, model, None, None, data=data))  # a spec made in Python
