"""The site's own 404, 400 and 500 pages, with DEBUG off and with DEBUG on (as `make run` runs
the site): never Django's technical pages, which list every URL pattern, or show a traceback
with local variables and settings. The traceback goes to the log instead, and the API answers
JSON. The views that raise are this module's own URLs (``urlpatterns`` below, around the
site's), for the tests marked ``raising_urls``."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import include, path
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from securebench_site import urls as site_urls
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

SECRET = "exception-message-3b9f"
LOCAL = "local-variable-value-7d2a"
# What Django's technical pages say and the site's never do: the 404 lists the URL patterns
# ("Using the URLconf defined in …", then every pattern, the API schema's among them), the
# 500 and 400 show the traceback, local variables and settings.
TECHNICAL = ("URLconf", "api/v1/schema/", "Traceback", "DEBUG = True", "Local vars", "Raised by")


def explode(request: HttpRequest) -> HttpResponse:
    detail = LOCAL  # a local variable: the technical 500 page would show its value
    raise RuntimeError(f"{SECRET} {detail}")


def refuse(request: HttpRequest) -> HttpResponse:
    raise SuspiciousOperation(SECRET)


class ExplodingApi(APIView):
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        raise RuntimeError(SECRET)


urlpatterns = [
    path("explode/", explode),
    path("refuse/", refuse),
    path("api/v1/explode/", ExplodingApi.as_view()),
    path("", include(site_urls)),
]
# The root URLconf names the error handlers: the site's (None: Django's defaults).
handler400 = getattr(site_urls, "handler400", None)
handler404 = getattr(site_urls, "handler404", None)
handler500 = getattr(site_urls, "handler500", None)

raising_urls = pytest.mark.urls(__name__)


@pytest.fixture(params=[True, False], ids=["debug-on", "debug-off"])
def debug(request: pytest.FixtureRequest, settings) -> bool:
    """Every test runs with DEBUG on (`make run`) and off (production)."""
    settings.DEBUG = request.param
    return request.param


@pytest.fixture
def member(db) -> User:
    return make_user("ada", "viewer")


@pytest.fixture
def member_client(member: User) -> Client:
    """A signed-in member's member_client; a server error comes back as the page, not re-raised."""
    client = Client(raise_request_exception=False)
    client.force_login(member)
    return client


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def request_log() -> Iterator[list[logging.LogRecord]]:
    """What Django logs about requests (django.request: the terminal of `make run`)."""
    handler = Records()
    logger = logging.getLogger("django.request")
    logger.addHandler(handler)
    yield handler.records
    logger.removeHandler(handler)


def assert_no_technical_page(body: str) -> None:
    for text in TECHNICAL:
        assert text not in body, text
    assert SECRET not in body and LOCAL not in body


def assert_the_sites_frame(body: str) -> None:
    assert '<a class="brand" href="/">SecureBench</a>' in body
    assert '<link rel="stylesheet" href="/static/css/site.css">' in body
    assert re.search(r'<a class="btn btn-primary" href="/">Home page</a>', body)
    assert '<a class="btn" href="/docs/">Guides</a>' in body


# --- 404 -------------------------------------------------------------------------------------


def test_a_mistyped_url_shows_the_sites_404_page(debug, member_client):
    response = member_client.get("/pakcs/humaneval/")
    body = response.content.decode()

    assert response.status_code == 404
    assert '<h1 id="error-title">Page not found</h1>' in body
    assert "there is no page at <code>/pakcs/humaneval/</code>" in body
    assert_the_sites_frame(body)
    assert "<span>ada</span>" in body  # the member's own menu
    assert_no_technical_page(body)


def test_an_anonymous_visitor_is_offered_to_sign_in_on_the_404_page(debug, client):
    response = client.get("/no-such-page/")
    body = response.content.decode()

    assert response.status_code == 404
    assert "Page not found" in body
    assert 'shown to signed-in members only: <a href="/accounts/login/">sign in</a>' in body
    assert_no_technical_page(body)


def test_a_run_that_does_not_exist_shows_the_sites_404_page(debug, member_client):
    response = member_client.get("/runs/999999/")  # the view's get_object_or_404
    body = response.content.decode()

    assert response.status_code == 404
    assert "Page not found" in body
    assert_no_technical_page(body)
    assert "No Run matches" not in body and "No such run" not in body


def test_the_404_page_keeps_the_content_security_policy_and_its_script(debug, member_client):
    response = member_client.get("/no-such-page/")
    body = response.content.decode()
    nonce = re.search(r'<script src="/static/js/site.js" nonce="([^"]+)"', body)

    assert nonce, "the site's script, with the nonce of this response"
    assert f"'nonce-{nonce.group(1)}'" in response["Content-Security-Policy"]
    assert response["X-Frame-Options"] == "DENY"


def test_a_url_missing_its_slash_is_still_redirected(debug, member_client):
    response = member_client.get("/packs")

    assert response.status_code == 301 and response["Location"] == "/packs/"


# --- 500 and 400 -----------------------------------------------------------------------------


@raising_urls
def test_an_exception_shows_the_sites_500_page_and_logs_its_traceback(
    debug, member_client, request_log
):
    response = member_client.get("/explode/")
    body = response.content.decode()

    assert response.status_code == 500
    assert "Something went wrong on our side" in body
    assert_the_sites_frame(body)
    assert "<span>ada</span>" in body
    assert_no_technical_page(body)
    # The developer running `make run` is told where the traceback is; production says nothing.
    assert ("The traceback is in the terminal" in body) is debug
    (record,) = [r for r in request_log if r.exc_info]
    assert record.levelno == logging.ERROR and record.getMessage() == (
        "Internal Server Error: /explode/"
    )
    assert record.exc_info[0] is RuntimeError and SECRET in str(record.exc_info[1])


def failing_frame(request: HttpRequest) -> dict[str, str]:
    raise RuntimeError("the database is down")  # as the frame's role links would find it


@raising_urls
def test_the_500_page_is_shown_without_the_menu_when_the_frame_fails_too(
    debug, member_client, settings
):
    engine = settings.TEMPLATES[0]
    processors = [*engine["OPTIONS"]["context_processors"], f"{__name__}.failing_frame"]
    settings.TEMPLATES = [
        {**engine, "OPTIONS": {**engine["OPTIONS"], "context_processors": processors}}
    ]

    response = member_client.get("/explode/")
    body = response.content.decode()

    assert response.status_code == 500
    assert "Something went wrong on our side" in body
    assert "<span>ada</span>" not in body  # no request context, so no menu
    assert_no_technical_page(body)
    assert "the database is down" not in body


@raising_urls
def test_a_suspicious_request_shows_the_sites_400_page(debug, member_client):
    response = member_client.get("/refuse/")
    body = response.content.decode()

    assert response.status_code == 400
    assert '<h1 id="error-title">Bad request</h1>' in body
    assert_the_sites_frame(body)
    assert_no_technical_page(body)


# --- the API answers JSON --------------------------------------------------------------------


def test_an_api_resource_that_does_not_exist_is_a_json_404_as_before(debug, member_client):
    response = member_client.get("/api/v1/packs/no-such-pack/")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert set(json.loads(response.content)) == {"detail"}


def test_an_api_path_that_does_not_exist_is_a_json_404(debug, member_client):
    response = member_client.get("/api/v1/no-such-endpoint/")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content) == {"detail": "Not found."}


@raising_urls
def test_an_exception_in_the_api_is_a_json_500_without_its_traceback(debug, member_client):
    response = member_client.get("/api/v1/explode/")

    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content) == {"detail": "A server error occurred."}
