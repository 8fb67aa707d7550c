from django.urls import path

from runs import api, api_artifacts

urlpatterns = [
    path("runs/", api.RunListCreateApi.as_view(), name="api-runs"),
    path("runs/bundle/", api.RunBundleApi.as_view(), name="api-run-bundle"),
    path("runs/<int:run_id>/", api.RunDetailApi.as_view(), name="api-run"),
    path(
        "runs/<int:run_id>/candidates/",
        api.RunCandidatesApi.as_view(),
        name="api-run-candidates",
    ),
    path(
        "runs/<int:run_id>/artifacts/",
        api_artifacts.RunArtifactsApi.as_view(),
        name="api-run-artifacts",
    ),
    path("runs/<int:run_id>/submit/", api.RunSubmitApi.as_view(), name="api-run-submit"),
    path(
        "runs/<int:run_id>/evaluations/",
        api.RunEvaluationsApi.as_view(),
        name="api-run-evaluations",
    ),
    path(
        "runs/<int:run_id>/evaluations/<int:number>/",
        api.EvaluationStatusApi.as_view(),
        name="api-evaluation",
    ),
    path(
        "runs/<int:run_id>/evaluations/<int:number>/results/",
        api.EvaluationResultsApi.as_view(),
        name="api-evaluation-results",
    ),
]
