"""The choices of Selvedge's per-object enum properties (:mod:`.properties`): identifiers, labels and
tooltips, kept apart from the PropertyGroup so that operators can offer the same lists."""

from .scene_to_solver import BENDING_MODELS, PRESET_NAMES

ROLE_ITEMS = (
    ("NONE", "None", "Not simulated by Selvedge"),
    ("CLOTH", "Cloth", "Simulated as cloth"),
    ("COLLIDER", "Collider", "Cloth collides with this object"),
)
PRESET_ITEMS = tuple(
    (name, name.replace("_", " ").title(), f"Fabric preset '{name}': sets the sliders below") for name in PRESET_NAMES
)
SETTLE_ITEMS = (
    (
        "AUTO",
        "Auto",
        "On for a cloth without pins (a drape, a tablecloth, a garment held by friction), off for a pinned one",
    ),
    (
        "ON",
        "On",
        "Measure the stretch limit's coarse links halfway to the centres of the vertex groups they move, so a "
        "cloth at rest on a collider settles instead of fluttering at its folds (56 of 56 sheets dropped on a "
        "ball, 6 of 6 tablecloths on a table; off: 25 of 42 and 2 of 6 keep moving). A hanging sheet "
        "stretches a little more (P95 1.0 % -> 1.4 %), a skirt pinned at its waist swings and stretches under "
        "the pins, and a bake takes 1.1-1.2 times as long",
    ),
    ("OFF", "Off", "Measure the coarse links at their two vertices: the stiffest, for pinned cloth"),
)
BENDING_ITEMS = (
    ("cross_edge", "Cross Edge", "Distance constraint across each hinge: cheap, slightly anisotropic"),
    ("dihedral", "Dihedral", "Dihedral-angle constraint per hinge: handles large folds"),
    ("isometric", "Isometric", "Quadratic isometric bending (Bergou 2006): fast, for nearly inextensible cloth"),
    (
        "auto",
        "Auto",
        "Isometric when the rest shape is flat (a sewing pattern, a flat sheet), dihedral when it is curved",
    ),
)
PROXY_ITEMS = (
    ("AUTO", "Auto", "Pick the simplest proxy that fits"),
    ("PLANE", "Plane", "Infinite plane through the object's origin, along its local Z"),
    ("SPHERE", "Sphere", "Sphere fitted to the bounds"),
    ("CAPSULE", "Capsule", "Capsule fitted to the bounds"),
    ("BOX", "Box", "Oriented box from the bounds"),
    ("MESH", "Mesh", "The evaluated mesh itself"),
)
assert tuple(i[0] for i in BENDING_ITEMS) == BENDING_MODELS
