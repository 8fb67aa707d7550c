from django.urls import path

from runs import views

app_name = "runs"

# Included at the site root: run pages live under runs/, leaderboards under leaderboards/.
urlpatterns = [
    path("runs/", views.run_list, name="list"),
    path("runs/submit/", views.run_submit, name="submit"),
    path("runs/compare/", views.run_compare, name="compare"),
    path("runs/<int:run_id>/", views.run_detail, name="detail"),
    path("runs/<int:run_id>/reevaluate/", views.run_reevaluate, name="reevaluate"),
    path(
        "runs/<int:run_id>/evaluations/<int:number>/progress/",
        views.evaluation_progress,
        name="progress",
    ),
    path("runs/<int:run_id>/results/<int:result_id>/", views.result_detail, name="result"),
    path("leaderboards/", views.leaderboard_list, name="leaderboards"),
    path(
        "leaderboards/<str:pack_id>/v<int:version>/",
        views.leaderboard_detail,
        name="leaderboard",
    ),
]
