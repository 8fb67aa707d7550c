"""Whose fault, read in a real browser on `make run` with the publish gate on: on a machine
with Docker and no reachable registry, the examples that name python:3.12-slim run in the
locally built sandbox image and publish (make run says so at start, /operations/ per worker);
and where no image can stand in, their health reports read "not checked — infrastructure"
with the cause in words, never "failing"."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.site import SiteProcess, free_port
from tests.components import LOCAL_IMAGE, probe_docker, require
from tests.e2e.conftest import SCREENSHOTS

# The examples whose tasks name python:3.12-slim, which no registry serves here.
IMAGE_PACKS = ("python-functions", "terminal-files", "tiny-repo-patch")
MISSING = "securebench-missing/none:0"


def docker_site(tmp_path: Path, default_image: str) -> Iterator[tuple[SiteProcess, str]]:
    problem = probe_docker()
    if problem is not None:
        require("docker", problem)
    env = {
        "SECUREBENCH_HEALTH_ON_UPLOAD": "1",
        "SECUREBENCH_PUBLISH_GATE": "1",
        "SECUREBENCH_SANDBOX": "docker",
        # A newcomer's shell names no image (""); CI's names the local one: neither here.
        "SECUREBENCH_DEFAULT_IMAGE": default_image,
        "SECUREBENCH_IMAGE_ALIASES": "",
    }
    port = free_port()
    process = SiteProcess(tmp_path / "data", port, env=env)
    try:
        yield process, f"http://127.0.0.1:{port}"
    finally:
        process.stop()


@pytest.fixture
def newcomer_site(tmp_path: Path) -> Iterator[tuple[SiteProcess, str]]:
    yield from docker_site(tmp_path, "")


@pytest.fixture
def imageless_site(tmp_path: Path) -> Iterator[tuple[SiteProcess, str]]:
    """No image can stand in: the default image the operator named is not on the host."""
    yield from docker_site(tmp_path, MISSING)


def sign_in(page, base: str, password: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", password)
    page.click("button[type=submit]")


def test_without_a_registry_the_examples_run_in_the_local_image_and_publish(newcomer_site, browser):
    from playwright.sync_api import expect

    process, base = newcomer_site
    password = process.admin_password()
    # make run says at start what the packs' images run in.
    assert f"lacks and cannot pull runs in {LOCAL_IMAGE}" in process.output()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    sign_in(page, base, password)

    for pack in IMAGE_PACKS:
        page.goto(f"{base}/packs/{pack}/v1/")
        for _ in range(120):  # the health checks publish it: reload until they have
            if page.locator(".state-badge").first.inner_text().endswith("published"):
                break
            page.wait_for_timeout(2000)
            page.reload()
        expect(page.locator(".state-badge").first).to_contain_text("published")
        expect(page.locator("#health")).to_contain_text("healthy")
    page.screenshot(path=SCREENSHOTS / "infrastructure-published.png", full_page=True)

    page.goto(f"{base}/")
    choices = page.locator("[data-testid=score-references]")
    for pack in IMAGE_PACKS:
        expect(choices.filter(has_text=f"{pack} v1")).to_have_count(1)

    page.goto(f"{base}/operations/")
    expect(page.locator("table.workers")).to_contain_text(f"runs in {LOCAL_IMAGE}")


def test_checks_no_worker_could_run_read_not_checked_with_the_cause_never_failing(
    imageless_site, browser
):
    from playwright.sync_api import expect

    process, base = imageless_site
    password = process.admin_password()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    sign_in(page, base, password)

    page.goto(f"{base}/packs/python-functions/versions/1/health/")
    main = page.locator("main")
    expect(main.locator("h1")).to_contain_text("not checked — infrastructure", timeout=240_000)
    notice = page.locator(".not-checked-notice")
    expect(notice).to_contain_text("python:3.12-slim")
    expect(notice).to_contain_text("could not be pulled")
    expect(notice).to_contain_text("make sandbox-image")
    expect(notice).to_contain_text("waits for a worker that can run its checks")
    expect(notice.locator("a", has_text="operations page")).to_have_attribute(
        "href", "/operations/"
    )
    expect(page.locator("#findings")).to_contain_text("not checked — infrastructure")
    expect(main).not_to_contain_text("failing")
    expect(main).not_to_contain_text("✗")
    page.screenshot(path=SCREENSHOTS / "infrastructure-not-checked.png", full_page=True)

    # The version page: a draft, waiting, its badge the same words.
    page.goto(f"{base}/packs/python-functions/v1/")
    health = page.locator("#health")
    expect(health).to_contain_text("not checked — infrastructure")
    expect(health).to_contain_text(re.compile(r"checked again automatically, and published"))
    expect(page.locator("main")).not_to_contain_text("failing")
