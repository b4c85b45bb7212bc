"""Write ``.typings/bpy``: fake-bpy-module's stubs plus the properties Selvedge registers on Blender's types.

``register()`` adds ``Object.selvedge``, ``Scene.selvedge`` (PropertyGroups, operators/properties.py
and operators/scene_properties.py) and two ``WindowManager`` properties at run time; no static
checker can see that. This copies the ``bpy-stubs`` package of the type-check venv to
``.typings/bpy`` (pyproject.toml's ``[tool.pyright] stubPath``, ahead of installed stubs) and
declares those attributes in the copied classes, typed by the PropertyGroup classes themselves, so
``obj.selvedge.role`` is checked against the declarations in operators/properties.py and
``scene.selvedge.substeps`` against operators/scene_properties.py. Run by scripts/typecheck.sh;
``.typings/`` is ignored by git and by the extension build.
"""

import shutil
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: class in bpy.types -> attribute declarations added to it (as register() adds them).
ADDED = {
    "Object": ["selvedge: _selvedge_properties.SelvedgeObjectSettings"],
    "Scene": ["selvedge: _selvedge_scene_properties.SelvedgeSceneSettings"],
    "WindowManager": ["selvedge_preview_on_cancel: str", "selvedge_overlay_red_strain: float"],
}
IMPORT = (
    "import builtins\n"
    "from operators import properties as _selvedge_properties  # Selvedge's registered PropertyGroups\n"
    "from operators import scene_properties as _selvedge_scene_properties\n"
)


def fix_shadowed_property(lines: list[str]) -> list[str]:
    """fake-bpy-module declares ``Context.property`` (the property under the mouse), and a class-level
    name ``property`` shadows the builtin in every ``@property`` of that class body for a type checker:
    ``context.scene`` read as a method. Those decorators become ``@builtins.property``."""
    out, start = [], 0
    for i, line in enumerate(lines + ["class _End:\n"]):
        if line.startswith("class ") or i == len(lines):
            block = lines[start:i]
            if any(b.startswith("    property:") for b in block):
                block = [b.replace("    @property\n", "    @builtins.property\n") for b in block]
            out += block
            start = i
    return out


def main() -> int:
    source = Path(sysconfig.get_paths()["purelib"]) / "bpy-stubs"
    if not (source / "types" / "__init__.pyi").is_file():
        print(f"typecheck_stubs: no fake-bpy-module stubs at {source}", file=sys.stderr)
        return 2
    target = ROOT / ".typings" / "bpy"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    stub = target / "types" / "__init__.pyi"
    lines = fix_shadowed_property(stub.read_text(encoding="utf-8").splitlines(keepends=True))
    done = set()
    out = [IMPORT]
    for line in lines:
        out.append(line)
        for name, declarations in ADDED.items():
            if line.startswith(f"class {name}(") and name not in done:
                out += [f"    {d}\n" for d in declarations]
                done.add(name)
    if done != set(ADDED):
        print(f"typecheck_stubs: classes not found in {stub}: {sorted(set(ADDED) - done)}", file=sys.stderr)
        return 2
    stub.write_text("".join(out), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
