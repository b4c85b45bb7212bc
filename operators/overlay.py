"""Strain overlay: each cloth edge drawn in the 3D viewport, coloured by its strain.

The data comes from the last preview (:mod:`.preview_ops` records every simulated frame here,
in memory) or, for an object baked to a PC2 cache, from that cache file: positions per frame are
read once (reloaded when the file changes) and each edge's engineering strain
``(L - L0) / L0`` is measured against the first cached frame, the rest state. Either way this
is a measurement of stored results: the draw callback itself only looks up arrays and hands
them to the GPU, it never simulates or measures.

The draw handler (``SpaceView3D.draw_handler_add``, ``POST_VIEW``) is added by the
``selvedge.strain_overlay`` toggle and removed when it is toggled off or the add-on is
unregistered. Its handle lives in :data:`_HANDLE` (Blender's handler registry cannot be listed).
Under ``blender -b`` nothing is drawn: there is no GPU context.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import bpy
import numpy as np
from bpy.props import FloatProperty
from bpy.types import Operator

if TYPE_CHECKING:
    from bpy.stub_internal.rna_enums import OperatorReturnItems

#: The draw handler's handle while the overlay is on, else None.
_HANDLE = None
#: Per object name: its :class:`StrainRecord` (last preview, or its PC2 cache).
_RECORDS: dict = {}
#: GPU batches by (object name, record id, frame index): rebuilt only when something changes.
_BATCHES: dict = {}

#: Strain (fraction) drawn red when the window manager has no setting (unregistered).
DEFAULT_RED_STRAIN = 0.05
#: Colour stops: 0 blue, 1/4 cyan, 1/2 green, 3/4 yellow, 1 red (of the red strain).
_STOPS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
_RGB = np.array([[0.10, 0.30, 1.00], [0.00, 0.85, 0.90], [0.10, 0.85, 0.15], [0.95, 0.85, 0.05], [1.00, 0.10, 0.05]])


# ----------------------------------------------------------------------------------------------
# Blender-free helpers
def strain_colors(strain: np.ndarray, red_strain: float = DEFAULT_RED_STRAIN) -> np.ndarray:
    """RGBA float32 (E,4) per edge: blue at no stretch (or compression), red at ``red_strain`` and above."""
    t = np.clip(np.asarray(strain, dtype=np.float64) / max(float(red_strain), 1e-12), 0.0, 1.0)
    rgba = np.ones((t.size, 4), dtype=np.float32)
    for channel in range(3):
        rgba[:, channel] = np.interp(t.ravel(), _STOPS, _RGB[:, channel])
    return rgba


def mesh_edges(mesh) -> np.ndarray:
    """The mesh's edges as an (E,2) int32 array (one ``foreach_get``)."""
    edges = np.empty(2 * len(mesh.edges), dtype=np.int32)
    mesh.edges.foreach_get("vertices", edges)
    return edges.reshape(-1, 2)


def edge_lengths(positions: np.ndarray, edges: np.ndarray) -> np.ndarray:
    p = np.asarray(positions, dtype=np.float64)
    return np.linalg.norm(p[edges[:, 1]] - p[edges[:, 0]], axis=1)


def edge_strain(positions: np.ndarray, edges: np.ndarray, rest_length: np.ndarray) -> np.ndarray:
    """Engineering strain (L - L0) / L0 per edge; zero-length rest edges read 0."""
    safe = np.where(rest_length > 0, rest_length, 1.0)
    return np.where(rest_length > 0, (edge_lengths(positions, edges) - rest_length) / safe, 0.0)


def line_vertices(positions: np.ndarray, edges: np.ndarray, matrix=None) -> np.ndarray:
    """(2E,3) float32 endpoints, two per edge in edge order, optionally through a 4x4 matrix."""
    p = np.asarray(positions, dtype=np.float64)
    if matrix is not None:
        m = np.asarray(matrix, dtype=np.float64)
        p = p @ m[:3, :3].T + m[:3, 3]
    return p[edges.ravel()].astype(np.float32)


@dataclass
class StrainRecord:
    """Stored frames of one cloth object: positions (F,N,3) in object space and strain (F,E).

    ``count`` frames are valid (a running preview fills them one by one); sample 0 is the rest
    state at ``first``. ``stats`` holds the last frame's solver diagnostics when known.
    """

    edges: np.ndarray
    first: int
    positions: np.ndarray
    strain: np.ndarray
    count: int
    source: str
    #: (E,) edge lengths of sample 0, the reference of the strain
    rest_length: np.ndarray
    stamp: tuple | None = None
    stats: dict = field(default_factory=dict)

    def index(self, frame: int) -> int:
        """Sample index for a scene frame: clamped to the frames stored (the first/last hold outside)."""
        return int(min(max(frame - self.first, 0), max(self.count - 1, 0)))

    @property
    def last_frame(self) -> int:
        return self.first + self.count - 1


def new_record(edges, positions, source, first, count=1, stamp=None) -> StrainRecord:
    """A record over preallocated ``positions`` (F,N,3), whose first ``count`` samples are filled."""
    record = StrainRecord(
        edges=edges,
        first=first,
        positions=positions,
        strain=np.zeros((len(positions), len(edges)), dtype=np.float32),
        count=0,
        source=source,
        rest_length=edge_lengths(positions[0], edges),
        stamp=stamp,
    )
    for sample in range(count):
        set_sample(record, sample)
    return record


def set_sample(record: StrainRecord, sample: int) -> None:
    """Measure sample ``sample`` (already in ``record.positions``) and mark it valid."""
    record.strain[sample] = edge_strain(record.positions[sample], record.edges, record.rest_length)
    record.count = max(record.count, sample + 1)


# ----------------------------------------------------------------------------------------------
# Records
def set_record(obj, record: StrainRecord | None) -> None:
    if record is None:
        _RECORDS.pop(obj.name, None)
    else:
        _RECORDS[obj.name] = record
    _BATCHES.clear()


def restore_records(previous: dict) -> None:
    """Put back ``{object name: record or None}`` as it was (a reverted preview)."""
    for name, record in previous.items():
        if record is None:
            _RECORDS.pop(name, None)
        else:
            _RECORDS[name] = record
    _BATCHES.clear()


def _cache_stamp(obj):
    stored = obj.selvedge.bake_cache_file
    if not stored:
        return None
    path = bpy.path.abspath(stored)
    try:
        return path, os.stat(path).st_mtime_ns
    except OSError:
        return None


def record_for(obj) -> StrainRecord | None:
    """The object's record: the newest of its last preview and its PC2 cache (loaded when it changed)."""
    record = _RECORDS.get(obj.name)
    if record is not None and len(record.positions[0]) != len(obj.data.vertices):
        record = None  # the mesh changed since
    stamp = _cache_stamp(obj)
    if stamp is not None and (
        record is None
        or (record.source == "cache" and record.stamp != stamp)
        or (record.source == "preview" and record.stamp is not None and record.stamp < stamp[1])
    ):
        from ..solver.io_pc2 import CacheError, read_pc2

        try:
            positions, header = read_pc2(stamp[0])
        except (OSError, CacheError):
            return record
        if positions.shape[0] == 0 or positions.shape[1] != len(obj.data.vertices):
            return record
        record = new_record(
            mesh_edges(obj.data), positions, "cache", int(round(header.start_frame)), count=len(positions), stamp=stamp
        )
        set_record(obj, record)
    return record


def preview_stats(obj) -> dict | None:
    """The last preview frame's ``{"frame", "strain_max", "strain_p95", "ms_per_frame"}`` (this session), or None."""
    record = _RECORDS.get(obj.name)
    return record.stats if record is not None and record.source == "preview" and record.stats else None


def overlay_geometry(obj, frame: int, red_strain: float = DEFAULT_RED_STRAIN):
    """(world-space line endpoints (2E,3), colours (2E,4)) for ``obj`` at ``frame``, or None."""
    record = record_for(obj)
    if record is None or record.count == 0:
        return None
    i = record.index(frame)
    coords = line_vertices(record.positions[i], record.edges, obj.matrix_world)
    colors = np.repeat(strain_colors(record.strain[i], red_strain), 2, axis=0)
    return coords, colors


def red_strain(context) -> float:
    wm = getattr(context, "window_manager", None)
    return float(getattr(wm, "selvedge_overlay_red_strain", DEFAULT_RED_STRAIN))


# ----------------------------------------------------------------------------------------------
# Drawing
def _draw():
    """POST_VIEW callback. Under ``blender -b`` there is no GPU context: nothing to draw."""
    if bpy.app.background:
        return
    draw(bpy.context)


def draw(context) -> int:
    """Draw each visible cloth object's record as coloured lines into the bound GPU context; returns
    how many objects were drawn. Only looks up stored arrays (batches are cached per frame)."""
    import gpu
    from gpu_extras.batch import batch_for_shader

    scene = context.scene
    if scene is None:
        return 0
    drawn = 0
    frame = scene.frame_current
    scale = red_strain(context)
    try:
        shader = gpu.shader.from_builtin("POLYLINE_SMOOTH_COLOR")
    except (ValueError, SystemError):
        shader = gpu.shader.from_builtin("SMOOTH_COLOR")
    # (x, y, width, height); fake-bpy-module types the return as None
    viewport = cast("tuple[int, int, int, int]", gpu.state.viewport_get())
    gpu.state.depth_test_set("LESS_EQUAL")
    gpu.state.blend_set("ALPHA")
    try:
        for obj in scene.objects:
            if obj.type != "MESH" or obj.selvedge.role != "CLOTH" or not obj.visible_get():
                continue
            record = record_for(obj)
            if record is None or record.count == 0:
                continue
            key = (obj.name, id(record), record.index(frame), record.count, scale, tuple(map(tuple, obj.matrix_world)))
            batch = _BATCHES.get(key)
            if batch is None:
                geometry = overlay_geometry(obj, frame, scale)
                if geometry is None:
                    continue
                coords, colors = geometry
                # NumPy arrays (fake-bpy-module's stub names only gpu Buffers and sequences; Blender reads
                # any buffer-protocol array)
                content: dict[str, Any] = {"pos": coords, "color": colors}
                batch = batch_for_shader(shader, "LINES", content)
                if len(_BATCHES) > 64:
                    _BATCHES.clear()
                _BATCHES[key] = batch
            shader.bind()
            try:  # the polyline shader takes its width as uniforms; the plain one uses the GL state
                shader.uniform_float("viewportSize", (float(viewport[2]), float(viewport[3])))
                shader.uniform_float("lineWidth", 2.0)
            except ValueError:
                gpu.state.line_width_set(2.0)
            batch.draw(shader)
            drawn += 1
    finally:
        gpu.state.depth_test_set("NONE")
        gpu.state.blend_set("NONE")
    return drawn


def is_enabled() -> bool:
    return _HANDLE is not None


def _tag_redraw():
    wm = getattr(bpy.context, "window_manager", None)
    for window in getattr(wm, "windows", ()):
        for area in window.screen.areas:
            if area.type == "VIEW_3D":
                area.tag_redraw()


def enable(on: bool) -> bool:
    """Add or remove the draw handler (idempotent); returns whether the overlay is on."""
    global _HANDLE
    if on and _HANDLE is None:
        _HANDLE = bpy.types.SpaceView3D.draw_handler_add(_draw, (), "WINDOW", "POST_VIEW")
    elif not on and _HANDLE is not None:
        bpy.types.SpaceView3D.draw_handler_remove(_HANDLE, "WINDOW")
        _HANDLE = None
        _BATCHES.clear()
    _tag_redraw()
    return _HANDLE is not None


class SELVEDGE_OT_strain_overlay(Operator):
    """Show or hide each cloth edge coloured by strain (blue: none, red: the Red At strain) from the last
    preview or cache bake"""

    bl_idname = "selvedge.strain_overlay"
    bl_label = "Strain Overlay"
    bl_options = {"REGISTER"}

    action: bpy.props.EnumProperty(
        name="Action", items=(("TOGGLE", "Toggle", ""), ("ON", "On", ""), ("OFF", "Off", "")), default="TOGGLE"
    )

    def execute(self, context) -> set[OperatorReturnItems]:
        on = {"TOGGLE": not is_enabled(), "ON": True, "OFF": False}[self.action]
        enable(on)
        return {"FINISHED"}

    @classmethod
    def register(cls):
        bpy.types.WindowManager.selvedge_overlay_red_strain = FloatProperty(  # pyright: ignore
            name="Red At",
            description="Strain drawn red by the strain overlay (and above)",
            default=DEFAULT_RED_STRAIN,
            min=1e-4,
            soft_max=0.5,
            subtype="FACTOR",
            precision=3,
        )

    @classmethod
    def unregister(cls):
        enable(False)
        _RECORDS.clear()
        _BATCHES.clear()
        del bpy.types.WindowManager.selvedge_overlay_red_strain


CLASSES = (SELVEDGE_OT_strain_overlay,)
