from django.urls import re_path

from episodes import endpoints

app_name = "episodes"

# The CUBE endpoints: the last path segment is the capability (episodes.capabilities). The
# stock client strips a trailing slash from every URL it is given, so both forms answer.
urlpatterns = [
    re_path(r"^cube/runs/(?P<secret>[^/]+)/?$", endpoints.benchmark_endpoint, name="benchmark"),
    re_path(r"^cube/episodes/(?P<secret>[^/]+)/?$", endpoints.task_endpoint, name="task"),
]
