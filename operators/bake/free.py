"""Free Bake: remove what bakes created on an object (modifier, cache files, shape keys) and nothing else."""

from __future__ import annotations

from pathlib import Path

import bpy

from .shape_keys import free_shape_keys


def free_bake(obj) -> list[str]:
    """Remove what bakes created on ``obj``: our Mesh Cache modifier, our cache files, our shape keys."""
    done = []
    s = obj.selvedge
    mod = obj.modifiers.get(s.bake_modifier) if s.bake_modifier else None
    if mod is not None and mod.type == "MESH_CACHE":
        obj.modifiers.remove(mod)
        done.append(f"modifier {s.bake_modifier!r}")
    for attribute in ("bake_cache_file", "bake_sidecar_file"):
        stored = getattr(s, attribute)
        if stored:
            path = Path(bpy.path.abspath(stored))
            if path.is_file():
                path.unlink()
                done.append(str(path))
            setattr(s, attribute, "")
    s.bake_modifier = ""
    removed = free_shape_keys(obj)
    if removed:
        done.append(f"{removed} shape keys")
    return done
