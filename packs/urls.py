from django.urls import path

from packs import diff_views, views

app_name = "packs"

urlpatterns = [
    path("", views.pack_list, name="list"),
    path("<str:pack_id>/", views.pack_detail, name="detail"),
    path("<str:pack_id>/compare/", diff_views.version_compare, name="compare"),
    path("<str:pack_id>/publish-policy/", views.pack_publish_policy, name="publish-policy"),
    path("<str:pack_id>/v<int:version>/", views.version_detail, name="version"),
    path(
        "<str:pack_id>/v<int:version>/tasks/<path:task_id>",
        views.task_detail,
        name="task",
    ),
    path(
        "<str:pack_id>/v<int:version>/files/<path:path>",
        views.public_file,
        name="public-file",
    ),
]
