from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from dashboard import views as dashboard_views
from packs import views as pack_views

urlpatterns = [
    path("", dashboard_views.home, name="home"),
    path("home/now-running/", dashboard_views.now_running, name="home-now-running"),
    path("docs/", include("dashboard.urls")),
    path("upload/", pack_views.pack_upload, name="pack-upload"),
    path("packs/", include("packs.urls")),
    path("evaluations/", include("evaluations.urls")),
    path("", include("runs.urls")),
    path("", include("episodes.urls")),
    path("", include("pack_health.urls")),
    path("", include("operations.urls")),
    path("api/v1/", include("packs.api_urls")),
    path("api/v1/", include("evaluations.api_urls")),
    path("api/v1/", include("runs.api_urls")),
    path("api/v1/", include("pack_health.api_urls")),
    path("api/v1/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "api/v1/docs/",
        SpectacularSwaggerSplitView.as_view(
            url_name="api-schema", template_name="api/swagger_ui.html"
        ),
        name="api-docs",
    ),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]

# The site's own error pages (JSON under /api/); with DEBUG on, ErrorPagesMiddleware gives the
# same ones in place of Django's technical pages.
handler400 = "securebench_site.error_pages.bad_request"
handler404 = "securebench_site.error_pages.page_not_found"
handler500 = "securebench_site.error_pages.server_error"
