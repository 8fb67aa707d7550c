from django.urls import path

from pack_health import views

app_name = "pack_health"

# Included at the site root: the report lives under its version's pack URL, the audited
# evidence panel beside runs' other privileged panels.
urlpatterns = [
    path(
        "packs/<str:pack_id>/versions/<int:version>/health/",
        views.health_report,
        name="report",
    ),
    path(
        "packs/<str:pack_id>/versions/<int:version>/health/<int:number>/progress/",
        views.health_progress,
        name="progress",
    ),
    path(
        "packs/<str:pack_id>/versions/<int:version>/health/check/",
        views.health_check_again,
        name="check-again",
    ),
    path(
        "packs/<str:pack_id>/versions/<int:version>/health/publish/",
        views.health_publish,
        name="publish",
    ),
    path(
        "privileged/packs/<str:pack_id>/v<int:version>/health/<int:number>/findings/<int:finding_id>/",
        views.finding_evidence,
        name="evidence",
    ),
]
