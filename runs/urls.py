from django.urls import path

from runs import privileged_diff, privileged_views, reference_views, views

app_name = "runs"

# Included at the site root: run pages live under runs/, leaderboards under leaderboards/.
urlpatterns = [
    path("runs/", views.run_list, name="list"),
    path("runs/submit/", views.run_submit, name="submit"),
    path("runs/compare/", views.run_compare, name="compare"),
    path("runs/<int:run_id>/", views.run_detail, name="detail"),
    path("runs/<int:run_id>/reevaluate/", views.run_reevaluate, name="reevaluate"),
    path(
        "runs/<int:run_id>/evaluations/<int:number>/progress/",
        views.evaluation_progress,
        name="progress",
    ),
    path("runs/<int:run_id>/results/<int:result_id>/", views.result_detail, name="result"),
    path(
        "runs/<int:run_id>/evaluations/<int:number>/privileged/program-log/",
        privileged_views.evaluation_program_log,
        name="evaluation-program-log",
    ),
    path(
        "runs/<int:run_id>/results/<int:result_id>/privileged/<str:part>/",
        privileged_views.result_privileged,
        name="result-privileged",
    ),
    path(
        "packs/<str:pack_id>/v<int:version>/reference-runs/",
        reference_views.reference_runs_create,
        name="reference-runs",
    ),
    path("leaderboards/", views.leaderboard_list, name="leaderboards"),
    path(
        "leaderboards/<str:pack_id>/v<int:version>/",
        views.leaderboard_detail,
        name="leaderboard",
    ),
    # Debug mode, privileged panels (audited) and the audit log.
    path("debug-mode/", privileged_views.debug_mode_on, name="debug-mode"),
    path("debug-mode/off/", privileged_views.debug_mode_off, name="debug-mode-off"),
    path(
        "privileged/packs/<str:pack_id>/v<int:version>/resource/",
        privileged_views.reveal_resource,
        name="reveal-resource",
    ),
    path(
        "privileged/packs/<str:pack_id>/v<int:version>/files/",
        privileged_views.sealed_file_list,
        name="sealed-files",
    ),
    path(
        "privileged/packs/<str:pack_id>/v<int:version>/file/",
        privileged_views.reveal_file,
        name="reveal-file",
    ),
    path(
        "privileged/evaluations/<str:name>/v<int:version>/file/",
        privileged_views.reveal_evaluation_file,
        name="evaluation-file",
    ),
    path("privileged/packs/<str:pack_id>/diff/", privileged_diff.reveal_diff, name="diff-reveal"),
    path("audit/", privileged_views.audit_log, name="audit-log"),
]
