"""Collision layer of the XPBD solver: body proxies, friction and self-collision (001 ch. 6).

Usage::

    from selvedge.solver.collisions import Colliders, Plane, Sphere, Capsule, Box, TriangleMesh
    contacts = Colliders([Plane(), Sphere(0.3, name="head", position=(0, 0, 1.6))], cloth_thickness=0.004)
    cloth = Cloth(vertices, faces, contact_handler=contacts)
    contacts.set_transform("head", position, quaternion_wxyz)   # pose at the end of the next frame
    cloth.step()
"""

from .colliders import Colliders, SelfCollision
from .proxies import (
    Box,
    Capsule,
    Collider,
    Plane,
    SDFGrid,
    Sphere,
    TriangleMesh,
    combined_friction,
    orient_closed_mesh,
    quaternion_axis_angle,
    quaternion_between,
)

__all__ = [
    "Box",
    "Capsule",
    "Collider",
    "Colliders",
    "Plane",
    "SDFGrid",
    "SelfCollision",
    "Sphere",
    "TriangleMesh",
    "combined_friction",
    "orient_closed_mesh",
    "quaternion_axis_angle",
    "quaternion_between",
]
