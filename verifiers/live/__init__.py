"""Live workspaces of terminal_task and repo_patch episodes (no Django; see workspace.py)."""

from verifiers.live.layout import (
    LiveWorkspace,
    WorkspaceLimits,
    WorkspaceUnsupported,
    plan_live_workspace,
)
from verifiers.live.workspace import (
    ActionOutcome,
    LiveWorkspaceError,
    changed_paths,
    destroy,
    list_files,
    read_file,
    repo_diff,
    run_bash,
    seed,
    workspace_candidate,
    write_file,
)

__all__ = [
    "ActionOutcome",
    "LiveWorkspace",
    "LiveWorkspaceError",
    "WorkspaceLimits",
    "WorkspaceUnsupported",
    "changed_paths",
    "destroy",
    "list_files",
    "plan_live_workspace",
    "read_file",
    "repo_diff",
    "run_bash",
    "seed",
    "workspace_candidate",
    "write_file",
]
