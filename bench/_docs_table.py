"""Write one bench's current table into ``docs/benchmarks.md``.

Each bench script owns one section of that file, between ``<!-- bench:NAME -->`` and
``<!-- /bench:NAME -->``; ``--write-docs`` on a bench replaces its section with the command that
produced it, the host it ran on and the table, and leaves every other section as it was. The file
is written atomically (a temporary file renamed over it), so an interrupted bench loses nothing.
"""

from __future__ import annotations

import os
import platform
import re
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def host_line() -> str:
    """One line naming the machine: ratios travel between hosts, milliseconds do not."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            names = [line.split(":", 1)[1].strip() for line in info if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}"


def markdown_table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def write_section(name: str, command: str, body: str, path: Path = DOCS) -> None:
    """Replace (or append) the section ``name`` of ``docs/benchmarks.md`` with ``body``."""
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n```sh\n{command}\n```\nHost: {host_line()}.\n\n{body.strip()}\n{end}"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".benchmarks.", suffix=".md")
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)
