from django.urls import path, re_path

from episodes import endpoints, views

app_name = "episodes"

# The CUBE endpoints: the last path segment is the capability (episodes.capabilities). The
# stock client strips a trailing slash from every URL it is given, so both forms answer.
urlpatterns = [
    re_path(r"^cube/runs/(?P<secret>[^/]+)/?$", endpoints.benchmark_endpoint, name="benchmark"),
    re_path(r"^cube/episodes/(?P<secret>[^/]+)/?$", endpoints.task_endpoint, name="task"),
]

# Pages: open a run from a version page, the run page's episodes table and the URL's
# revocation, a result page's trajectory and its JSONL transcript.
urlpatterns += [
    path("runs/live/<str:pack_id>/v<int:version>/", views.episode_run_open_view, name="open"),
    path("runs/<int:run_id>/episodes/", views.run_episodes, name="run-episodes"),
    path("runs/<int:run_id>/episodes/revoke/", views.episode_run_revoke_view, name="revoke"),
    path(
        "runs/<int:run_id>/results/<int:result_id>/trajectory/",
        views.result_trajectory,
        name="trajectory",
    ),
    path(
        "runs/<int:run_id>/results/<int:result_id>/transcript.jsonl",
        views.result_transcript,
        name="transcript",
    ),
]
