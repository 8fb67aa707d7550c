from django.urls import path

from evaluations import api

urlpatterns = [
    path("evaluations/", api.EvaluationListApi.as_view(), name="api-evaluations"),
    path(
        "evaluations/<str:name>/<int:version>/",
        api.EvaluationDetailApi.as_view(),
        name="api-evaluation",
    ),
]
