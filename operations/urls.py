from django.urls import path

from operations import views

app_name = "operations"

urlpatterns = [
    path("operations/", views.overview_page, name="overview"),
    path("operations/images/pull/", views.pull_image, name="pull-image"),
    path("health/", views.health_moved, name="health-moved"),
    path("health/live", views.live, name="live"),
    path("health/ready", views.ready, name="ready"),
    path("metrics", views.metrics_page, name="metrics"),
]
