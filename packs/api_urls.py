from django.urls import path

from packs import api, diff_api

urlpatterns = [
    path("packs/", api.PackListApi.as_view(), name="api-packs"),
    path("uploads/", api.PackUploadApi.as_view(), name="api-pack-upload"),
    path("packs/<str:pack_id>/", api.PackDetailApi.as_view(), name="api-pack"),
    path("packs/<str:pack_id>/diff/", diff_api.VersionDiffApi.as_view(), name="api-pack-diff"),
    path(
        "packs/<str:pack_id>/versions/<int:version>/",
        api.VersionDetailApi.as_view(),
        name="api-version",
    ),
    path(
        "packs/<str:pack_id>/versions/<int:version>/tasks/",
        api.VersionTasksApi.as_view(),
        name="api-tasks",
    ),
    path(
        "packs/<str:pack_id>/versions/<int:version>/files/<path:path>",
        api.PublicFileApi.as_view(),
        name="api-public-file",
    ),
    path(
        "packs/<str:pack_id>/versions/<int:version>/agent-bundle/",
        api.AgentBundleApi.as_view(),
        name="api-agent-bundle",
    ),
]
