from django.urls import path

from pack_health import api

urlpatterns = [
    path(
        "packs/<str:pack_id>/versions/<int:version>/health/",
        api.HealthReportApi.as_view(),
        name="api-health",
    ),
    path(
        "packs/<str:pack_id>/versions/<int:version>/health/check/",
        api.HealthCheckApi.as_view(),
        name="api-health-check",
    ),
    path(
        "packs/<str:pack_id>/versions/<int:version>/health/publish/",
        api.HealthPublishApi.as_view(),
        name="api-health-publish",
    ),
]
