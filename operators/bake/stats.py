"""What the panel's Diagnostics show of an object's last cache bake, read from its JSON sidecar."""

from __future__ import annotations

import json
import os

import bpy

_STATS_CACHE: dict = {}


def last_bake_stats(obj) -> dict | None:
    """Summary of the object's last cache bake from its sidecar (cached by path and mtime; for the panel).

    ``{"frames", "frame_start", "frame_end", "strain_max", "strain_p95", "ms_per_frame", "frames_refined"}``
    where strain and time are those of the last frame and ``frames_refined`` counts the frames run
    again with more substeps (stretched past the scene's Refine Above, or crossed in a collision
    world); None when there is no readable sidecar. A cloth baked in a collision world adds
    ``cloth_cloth_contacts`` and ``self_contacts`` (pairs that pushed in one substep, the most over
    the last frame) and ``intersections`` (crossing triangle pairs of the world's cloths: at the
    last frame, and ``intersections_max`` over all frames).
    """
    stored = obj.selvedge.bake_sidecar_file
    if not stored:
        return None
    path = bpy.path.abspath(stored)
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        return None
    key = (path, stamp)
    if key not in _STATS_CACHE:
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
            frames = doc["frames"]
            last = frames[-1] if frames else {}
            stats = {
                "frames": len(frames),
                "frame_start": doc["frame_start"],
                "frame_end": doc["frame_end"],
                "strain_max": last.get("strain_max", 0.0),
                "strain_p95": last.get("strain_p95", 0.0),
                "ms_per_frame": last.get("timings_ms", {}).get("total", 0.0),
                # frames run again with more substeps: stretched (Stretch Refinements) or, in a
                # collision world, crossed
                "frames_refined": sum(f.get("substep_scale", 1) > 1 for f in frames),
            }
            contacts = last.get("contacts", {})
            if "cloth_intersections" in contacts:
                stats["cloth_cloth_contacts"] = contacts.get("cloth_cloth_pushing_pairs_max", 0)
                stats["self_contacts"] = contacts.get("self_pushing_pairs_max", 0)
                stats["intersections"] = contacts["cloth_intersections"]
                stats["intersections_max"] = max(f.get("contacts", {}).get("cloth_intersections", 0) for f in frames)
            _STATS_CACHE.clear()
            _STATS_CACHE[key] = stats
        except (OSError, ValueError, KeyError):
            return None
    return _STATS_CACHE[key]
