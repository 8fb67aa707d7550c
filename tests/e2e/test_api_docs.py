"""The API docs page in real Chromium: Swagger UI from our own static files, every operation
listed, a request tried from the page, and not one CSP violation or outside request."""

from __future__ import annotations

from drf_spectacular.generators import SchemaGenerator

from tests.e2e.conftest import SCREENSHOTS

HTTP_METHODS = {"get", "post", "put", "patch", "delete"}


def operation_count() -> int:
    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    return sum(1 for item in paths.values() for method in item if method in HTTP_METHODS)


def test_the_api_docs_render_every_operation_under_the_csp(admin_client, live_server, browser):
    # Database work first: Playwright runs an event loop in this thread once it starts.
    context = browser.new_context()
    session = admin_client.cookies["sessionid"].value
    context.add_cookies([{"name": "sessionid", "value": session, "url": live_server.url}])
    page = context.new_page()
    problems: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: m.type in ("error", "warning") and problems.append(m.text))
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("request", lambda r: r.url.startswith(live_server.url) or outside.append(r.url))

    page.goto(f"{live_server.url}/api/v1/docs/")
    page.wait_for_selector(".opblock")
    listed = page.locator(".opblock").count()
    packs_list = page.locator(".opblock-get", has_text="/api/v1/packs/").first
    packs_list.locator(".opblock-summary").click()
    packs_list.get_by_role("button", name="Try it out").click()
    packs_list.get_by_role("button", name="Execute").click()
    status = packs_list.locator(".live-responses-table tbody .response-col_status").first
    status.wait_for()
    page.screenshot(path=str(SCREENSHOTS / "api-docs.png"), full_page=False)

    assert listed == operation_count()
    assert status.inner_text().strip() == "200"
    assert problems == []
    assert outside == []
