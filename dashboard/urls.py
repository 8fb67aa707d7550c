from django.urls import path

from dashboard import views

app_name = "dashboard"

# Mounted at docs/: the guides of the repository's docs/ folder (dashboard.guides).
urlpatterns = [
    path("", views.guide_index, name="guides"),
    path("<slug:name>/", views.guide_page, name="guide"),
]
