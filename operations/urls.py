from django.urls import path

from operations import views

app_name = "operations"

urlpatterns = [
    path("health/", views.health_page, name="health"),
    path("health/images/pull/", views.pull_image, name="pull-image"),
    path("health/live", views.live, name="live"),
    path("health/ready", views.ready, name="ready"),
    path("metrics", views.metrics_page, name="metrics"),
]
