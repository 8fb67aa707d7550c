from django.urls import path

from evaluations import views

app_name = "evaluations"

urlpatterns = [
    path("upload/", views.evaluation_upload, name="upload"),
    path("<str:name>/", views.evaluation_versions, name="versions"),
    path("<str:name>/compare/", views.evaluation_compare, name="compare"),
    path("<str:name>/v<int:version>/", views.evaluation_detail, name="detail"),
]
