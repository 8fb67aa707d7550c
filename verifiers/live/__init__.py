"""Live workspaces of terminal_task, artifact_task and repo_patch episodes (no Django): where
one lives and how it starts (layout.py), the actions an episode's tools run on it
(sandboxed_actions.py)."""

from verifiers.live.layout import (
    LiveWorkspace,
    WorkspaceLimits,
    WorkspaceUnsupported,
    plan_live_workspace,
)
from verifiers.live.sandboxed_actions import (
    ActionOutcome,
    LiveWorkspaceError,
    artifact_candidate,
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
    "artifact_candidate",
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
