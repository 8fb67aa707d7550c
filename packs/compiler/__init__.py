"""The pack compiler: pure Python, no Django (DESIGN.md §3).

``compile_pack(path)`` turns a pack directory (manifest.yaml, tasks.jsonl, asset roots) into a
``CompiledPack`` whose resources are split by visibility lane, or raises ``PackError`` listing
every problem with its file, line and field (the first ``max_problems`` of them, and a count
of the rest). ``open_pack(path)`` is the same compile as a stream of tasks, for packs too
large to hold compiled in memory.
"""

from packs.compiler.compile import (
    CompiledPack,
    CompiledTask,
    CompileSummary,
    PackCompilation,
    agent_task_json,
    compile_pack,
    compiled_task_lanes,
    open_pack,
)
from packs.compiler.errors import PackError, Problem, more_problems_text
from packs.compiler.limits import CompileLimits
from packs.compiler.manifest import Manifest
from packs.compiler.paths import PackFileEntry
from packs.compiler.visibility import CompiledResource

__all__ = [
    "CompileLimits",
    "CompiledPack",
    "CompiledResource",
    "CompiledTask",
    "CompileSummary",
    "Manifest",
    "PackError",
    "PackCompilation",
    "PackFileEntry",
    "Problem",
    "agent_task_json",
    "compile_pack",
    "compiled_task_lanes",
    "more_problems_text",
    "open_pack",
]
