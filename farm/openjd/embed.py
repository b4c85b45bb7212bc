"""Copy farm/bake_shot.py, farm/render_frames.py, farm/farm_shots.py and operators/mesh_cache.py into the
template's embedded files.

The template embeds both task scripts, the module they share and the Mesh Cache playback contract
the render step sets (so a worker needs only Blender and the Selvedge extension, not this folder). Edit the .py files, then run ``python farm/openjd/embed.py``;
tests/farm/test_openjd_template.py fails while the embedded copies differ from the files.
"""

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "selvedge_bake_render.yaml"
#: ``data: |`` lines marked with the file whose text follows (indented 10 spaces).
MARKER = re.compile(r"^(?P<indent> *)data: \|  # embedded copy of (?P<file>(?:farm|operators)/[\w.]+)$")


def embed(text: str, root: Path) -> str:
    lines = text.splitlines(keepends=True)
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        match = MARKER.match(line.rstrip("\n"))
        if not match:
            continue
        pad = " " * (len(match["indent"]) + 2)
        while i < len(lines) and (lines[i].startswith(pad) or not lines[i].strip()):
            i += 1  # drop the old copy (its lines are indented deeper than 'data:')
        source = (root / match["file"]).read_text(encoding="utf-8")
        out += [(pad + s).rstrip() + "\n" for s in source.splitlines()]
    return "".join(out)


if __name__ == "__main__":
    new = embed(TEMPLATE.read_text(encoding="utf-8"), HERE.parents[1])
    TEMPLATE.write_text(new, encoding="utf-8")
    print(f"updated {TEMPLATE}")
    sys.exit(0)
