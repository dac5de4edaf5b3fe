"""JSON Schemas of the spec kinds (Draft-07), for editors' yaml-language-server modeline."""

from __future__ import annotations

from typing import Any

import msgspec

from scalemodel import specs
from scalemodel.specs.sweep import SweepSpec


def _finish(node: Any) -> Any:
    """msgspec's schema made ours: a type's own schema (``x-schema``: quantities, labels) replaces the
    one msgspec derives, keeping the field's description and default."""
    if isinstance(node, list):
        return [_finish(x) for x in node]
    if not isinstance(node, dict):
        return node
    if "x-schema" in node:
        own = dict(node["x-schema"])
        for key in ("title", "description", "default"):
            if key in node:
                own[key] = node[key]
        return _finish(own)
    # a workload may leave its kind out (the loader infers it): no discriminator keyword
    return {k: _finish(v) for k, v in node.items() if k != "discriminator"}


def _untag(defs: dict[str, Any]) -> None:
    """A workload's ``kind`` may be left out (the loader infers it): not required, and its default shown."""
    for d in defs.values():
        props = d.get("properties", {})
        kind = props.get("kind")
        if isinstance(kind, dict) and "enum" in kind and len(kind["enum"]) == 1 and "kind" in d.get("required", []):
            props["kind"] = {"const": kind["enum"][0], "default": kind["enum"][0], "type": "string"}
            d["required"] = [r for r in d["required"] if r != "kind"]


def _inline_root(schema: dict[str, Any]) -> dict[str, Any]:
    """``{"$ref": "#/$defs/X", "$defs": {...}}`` -> X's schema at the top, the others under ``$defs``."""
    ref = schema.get("$ref", "")
    defs = dict(schema.get("$defs", {}))
    if not ref.startswith("#/$defs/"):
        return schema
    root = defs.pop(ref.removeprefix("#/$defs/"))
    return {**({"$defs": defs} if defs else {}), **root}


def _allow_extends(d: dict[str, Any]) -> dict[str, Any]:
    """Accept either the complete spec, or one with ``extends:`` that lists only what it changes."""
    strict = {k: v for k, v in d.items() if k != "title"}
    strict["properties"] = {**strict.get("properties", {}),
                            "extends": {"type": "string", "description": "built-in name or file to derive from"}}
    relaxed = {**strict, "required": ["extends"]}
    return {"title": d.get("title", ""), "anyOf": [strict, relaxed]}


def json_schema(kind: str) -> dict[str, Any]:
    """The Draft-07 JSON Schema of a spec kind (msgspec's schema with the draft declared)."""
    models: dict[str, Any] = {"cluster": specs.ClusterSpec, "accelerator": specs.AcceleratorSpec,
                              "workload": specs.Workload, "scenario": specs.ScenarioSpec, "sweep": SweepSpec}
    schema = _finish(msgspec.json.schema(models[kind]))
    _untag(schema.get("$defs", {}))
    schema = _inline_root(schema)
    schema = {"$schema": "http://json-schema.org/draft-07/schema#",
              "title": f"scalemodel {kind} spec", **schema}
    if kind == "scenario":
        gpus = schema.get("properties", {}).get("gpus")
        if gpus is not None:
            schema["properties"]["gpus"] = {"anyOf": [{"type": "integer", "exclusiveMinimum": 0}, gpus]}
    if kind in ("cluster", "scenario"):
        # Cluster and scenario fields also accept a built-in name (resolved by the loader).
        props = schema.get("properties", {})
        for field in ("accelerator", "cluster", "model"):
            if field in props:
                props[field] = {"anyOf": [{"type": "string", "description": "built-in name or file"}, props[field]]}
    nested = schema.get("$defs", {}).get("ClusterSpec", {}).get("properties", {})
    if "accelerator" in nested:
        nested["accelerator"] = {"anyOf": [{"type": "string", "description": "built-in name or file"},
                                           nested["accelerator"]]}
    # Any spec may derive from another (`extends: NAME`, resolved by the loader); then only the
    # fields it changes need to be present.
    names = ("ClusterSpec", "AcceleratorSpec", "TransformerWorkload", "GenericWorkload")
    for name in names:
        if name in schema.get("$defs", {}):
            schema["$defs"][name] = _allow_extends(schema["$defs"][name])
    if schema.get("title") in names or schema.get("properties", {}).get("kind", {}).get("const") in (
            "cluster", "accelerator"):
        top: dict[str, Any] = {k: schema.pop(k) for k in ("$schema", "$defs") if k in schema}
        schema = {**top, "title": f"scalemodel {kind} spec", **_allow_extends(schema)}
    # A derived cluster lists only the tiers it changes, each by name with only the changed fields.
    defs = schema.get("$defs", {})
    if "TierSpec" in defs:
        defs["TierOverride"] = {**defs["TierSpec"], "title": "TierOverride", "required": ["name"]}
        cluster = defs.get("ClusterSpec", schema if kind == "cluster" else None)
        if cluster is not None and "anyOf" in cluster:
            relaxed = cluster["anyOf"][1]
            relaxed["properties"] = {**relaxed["properties"],
                                     "tiers": {**relaxed["properties"]["tiers"],
                                               "items": {"$ref": "#/$defs/TierOverride"}}}
    return schema
