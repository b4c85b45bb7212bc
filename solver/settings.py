"""What a cloth gets (ClothOptions) and how much work each frame may do (SolverSettings).

Kept apart from the simulation so the Blender side and farm tools can build and validate
settings without touching the solver state (001 sec. 7.6: budget belongs to the pipeline,
feel to the artist).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import ClothInputError

SOLVE_MODES = ("auto", "serial", "colored", "jacobi")
#: Mesh blocks of the coloured schedule that ``solve_mode="auto"`` runs when ``threads`` is unset: a
#: fixed count, so an auto bake is the same on every machine whatever its cores (up to this many
#: threads share the work; docs/design/solver.md, "Solve modes").
AUTO_BLOCKS = 4
#: Vertices per block of the auto mode at least: a smaller cloth runs in fewer blocks, in one
#: (serial) below twice this, where a coloured frame's waits cost about what its blocks save.
AUTO_BLOCK_MIN_VERTICES = 1024
BENDING_MODELS = ("cross_edge", "dihedral", "isometric", "auto")


@dataclass
class SolverSettings:
    """The budget and the world: how much work per frame, and in which way."""

    substeps: int = 10
    iterations: int = 1
    #: "auto" (coloured in up to :data:`AUTO_BLOCKS` blocks, fixed by the mesh, for a cloth stepped on
    #: its own; serial for a small one and in a ``CollisionWorld``), "serial" (one thread,
    #: bit-identical), "colored" (``threads`` blocks, by default one per Numba thread) or "jacobi".
    solve_mode: str = "auto"
    #: Over-relaxation for Jacobi (Macklin 2014 suggest 1 < omega < 2).
    jacobi_omega: float = 1.5
    fps: float = 24.0
    gravity_m_s2: tuple = (0.0, 0.0, -9.81)
    wind_m_s: tuple = (0.0, 0.0, 0.0)
    #: A vertex faster than this (m/s) means the simulation exploded: the frame is rolled back.
    max_speed_m_s: float = 500.0
    #: An edge stretched beyond this strain (10 = 1000 %) means the budget cannot hold the cloth
    #: together (too few substeps for the mesh and material): the frame is rolled back.
    max_strain: float = 10.0
    #: Threads (and mesh blocks) of the coloured mode (None: the mesh's in the auto mode, up to
    #: :data:`AUTO_BLOCKS`; Numba's thread count, all cores, in the coloured one).
    threads: int | None = None
    #: How often a frame evaluates the force fields and aerodynamics (held in between; at most
    #: ``substeps``): 1 keeps them within 15 % of the elastic solve on a 64 x 64 sheet.
    force_updates_per_frame: int = 1
    #: A frame that ends stretched (the 95th percentile of the edges' strain beyond their fabric's
    #: stretch limit above ``refine_stretch_above``) is rolled back and run again with twice the
    #: substeps, up to this many times (2: at most 4x the substeps; 0 = off, the default). It answers
    #: the impact a few substeps cannot stop (a garment landing on a body: worst-frame P95 13 -> 5.5 %
    #: for 9-15 % more solver time over the shot with the coarse links at their members; with them
    #: halfway, the default for that unpinned garment, 14 -> 5.8 % for 1.7 x, as it rests just over
    #: the 5 % threshold and a third of its frames are run again), paid for only in the frames that
    #: need it. Off by default: a frame run with more substeps than its neighbours releases the
    #: solve's stored stretch as motion, and a cloth resting on a collider can be thrown about by it
    #: (docs/design/stiff_fabric.md, "Refined frames"). A collision world refines all its cloths together.
    stretch_refinements: int = 0
    #: The strain beyond the stretch limit (0.05 = 5 %) whose 95th percentile over the edges sends a
    #: frame back for more substeps (see ``stretch_refinements``).
    refine_stretch_above: float = 0.05

    def validate(self) -> None:
        if not (isinstance(self.substeps, (int, np.integer)) and self.substeps >= 1):
            raise ClothInputError(f"substeps must be an integer >= 1, got {self.substeps!r}")
        if not (isinstance(self.iterations, (int, np.integer)) and self.iterations >= 1):
            raise ClothInputError(f"iterations must be an integer >= 1, got {self.iterations!r}")
        if self.solve_mode not in SOLVE_MODES:
            raise ClothInputError(f"solve_mode must be one of {SOLVE_MODES}, got {self.solve_mode!r}")
        if self.threads is not None and not (isinstance(self.threads, (int, np.integer)) and self.threads >= 1):
            raise ClothInputError(f"threads must be None or an integer >= 1, got {self.threads!r}")
        if not (isinstance(self.force_updates_per_frame, (int, np.integer)) and self.force_updates_per_frame >= 1):
            raise ClothInputError(
                f"force_updates_per_frame must be an integer >= 1, got {self.force_updates_per_frame!r}"
            )
        if not (isinstance(self.stretch_refinements, (int, np.integer)) and 0 <= self.stretch_refinements <= 4):
            raise ClothInputError(
                f"stretch_refinements must be an integer from 0 to 4, got {self.stretch_refinements!r}"
            )
        if not (np.isfinite(self.refine_stretch_above) and self.refine_stretch_above >= 0.0):
            raise ClothInputError(f"refine_stretch_above must be a strain >= 0, got {self.refine_stretch_above!r}")
        if not 0.0 < self.jacobi_omega < 2.0:
            raise ClothInputError(f"jacobi_omega must lie in (0, 2), got {self.jacobi_omega}")
        if not (np.isfinite(self.fps) and self.fps > 0):
            raise ClothInputError(f"fps must be positive, got {self.fps}")
        for name in ("gravity_m_s2", "wind_m_s"):
            value = np.asarray(getattr(self, name), dtype=np.float64)
            if value.shape != (3,) or not np.isfinite(value).all():
                raise ClothInputError(f"{name} must be three finite numbers, got {getattr(self, name)!r}")


@dataclass
class ClothOptions:
    """Which constraints a cloth gets and how they are set up."""

    bending: bool = True
    #: "auto": isometric bending for a flat rest shape (2.5x cheaper per hinge, same energy for
    #: small folds), dihedral otherwise; see ``constraints.AUTO_FLAT_REST_ANGLE_RAD``.
    bending_model: str = "auto"
    shear: bool = True
    tethers: bool = True
    tether_scale: float = 1.05
    tether_geodesic: bool = True
    tether_count: int = 1
    tether_compliance: float = 0.0
    #: Hierarchical stretch limiting (:mod:`.multilevel`): no edge, and no coarse span of the mesh,
    #: stretched beyond ``Material.stretch_limit``; what keeps stiff fabric from stretching like rubber.
    stretch_limiting: bool = True
    #: Coarse levels above the mesh at most (each has about a quarter of the vertices below it).
    stretch_limit_levels: int = 8
    #: The graph the levels are coarsened over: "auto", the mesh edges with each quad's diagonal
    #: chosen so that they alternate (:mod:`.level_graph`: a quad mesh cut one way, as Blender's loop
    #: triangles and a fan cut it, holds a 64 x 64 sheet at 1.15 % P95 instead of 3.0 %); True, the
    #: mesh edges plus every quad's second diagonal (1.58 %); False, the mesh edges as they are.
    stretch_limit_graph_diagonals: bool | str = "auto"
    #: The coarse pass runs before the contacts' narrow phases and never presses a vertex that
    #: touched a contact in the last substep into it (docs/design/stiff_fabric.md, issue 21).
    #: Off by default: with it a 1 m sheet dropped on a sphere never settles (kinetic energy stays
    #: ~2e-6 of its peak, a corner at 3-7 cm/s after 12-20 s, against 7e-9 at 16 s without).
    stretch_limit_contacts: bool = False
    #: Measure each coarse link halfway between its members and their aggregates' centres of mass
    #: (``multilevel.CENTRE_WEIGHT``; the aggregates are what the link's correction moves) instead
    #: of at the members, whose fine-scale motion the correction would apply to whole aggregates: so
    #: a cloth at rest on a collider settles (56 of 56 sheets dropped on a ball, 6 of 6 tablecloths
    #: on a table; at the members 25 of 42 and 2 of 6 kept moving at 3-60 cm/s). It costs a pinned
    #: cloth: a two-corner 64 x 64 sheet's P95 1.0 -> 1.4 %, and a tube hanging from a pinned ring
    #: (a skirt) swings and stretches under the ring (max 0.7 -> 3.0 %). "auto" (the default): on
    #: for a cloth without pins, off for a pinned one; 1.1-1.2 x the time when on
    #: (docs/design/stiff_fabric.md, "Halfway, on every level").
    coarse_links_between_aggregates: bool | str = "auto"
    #: Newton steps of the fine level's fast projection after each substep's contacts
    #: (:mod:`.fine_projection`, Goldenthal 2007): every warp/weft edge over its stretch limit
    #: is projected back onto it by a global solve, the contacts' normals held (0 = off; a
    #: draped garment's landing P95 13 -> 3.0 % at 2 steps for 2.4 x the time, 2.1 % at 3 for
    #: 3.2 x; docs/design/stiff_fabric.md, "Fine level: fast projection").
    fine_projection: int = 0
    #: Conjugate-gradient iterations per Newton step (at most).
    fine_projection_cg_iterations: int = 5
    #: Levenberg-Marquardt damping of each Newton step (relative to the system's diagonal): keeps
    #: the step bounded where the limits cannot all be met (a taut row between two pins).
    fine_projection_damping: float = 0.03
    #: Also push warp/weft edges shorter than ``(1 - limit) L0`` back out (compression limit).
    fine_projection_compression: bool = False
    #: Compliance (m/N) a soft pin of weight 0.5 gets; see ``constraints.build_soft_pins``.
    soft_pin_compliance: float = 1e-4
    #: "mesh": rest lengths from the 3D mesh; "pattern": from the UVs (2D pattern) x uv_scale_m.
    rest_length_source: str = "mesh"
    uv_scale_m: float = 1.0

    def validate(self) -> None:
        if self.bending_model not in BENDING_MODELS:
            raise ClothInputError(f"bending_model must be one of {BENDING_MODELS}, got {self.bending_model!r}")
        if self.rest_length_source not in ("mesh", "pattern"):
            raise ClothInputError(f"rest_length_source must be 'mesh' or 'pattern', got {self.rest_length_source!r}")
        if not self.tether_scale >= 1.0:
            raise ClothInputError(
                f"tether_scale must be >= 1 (a tether may not shorten the cloth), got {self.tether_scale}"
            )
        if self.coarse_links_between_aggregates not in (True, False, "auto"):
            raise ClothInputError(
                "coarse_links_between_aggregates must be True, False or 'auto', "
                f"got {self.coarse_links_between_aggregates!r}"
            )
        if self.stretch_limit_graph_diagonals not in (True, False, "auto"):
            raise ClothInputError(
                "stretch_limit_graph_diagonals must be True, False or 'auto', "
                f"got {self.stretch_limit_graph_diagonals!r}"
            )
        if not (int(self.stretch_limit_levels) == self.stretch_limit_levels and 0 <= self.stretch_limit_levels <= 16):
            raise ClothInputError(f"stretch_limit_levels must be an integer in 0..16, got {self.stretch_limit_levels}")
        if not (int(self.tether_count) == self.tether_count and 1 <= self.tether_count <= 8):
            raise ClothInputError(f"tether_count must be an integer in 1..8, got {self.tether_count}")
        if not (int(self.fine_projection) == self.fine_projection and 0 <= self.fine_projection <= 16):
            raise ClothInputError(f"fine_projection must be an integer in 0..16, got {self.fine_projection}")
        if not (
            int(self.fine_projection_cg_iterations) == self.fine_projection_cg_iterations
            and 1 <= self.fine_projection_cg_iterations <= 10000
        ):
            raise ClothInputError(
                f"fine_projection_cg_iterations must be an integer in 1..10000, got {self.fine_projection_cg_iterations}"
            )
        for name in ("tether_compliance", "soft_pin_compliance", "uv_scale_m", "fine_projection_damping"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise ClothInputError(f"{name} must be finite and >= 0, got {value}")
