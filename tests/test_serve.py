"""`make serve`, the production web server as the README prints it: gunicorn with DEBUG off,
migrations applied, static files collected and served, and an access log in which an episode
run's URL (a capability) is redacted."""

from __future__ import annotations

import re
import secrets
import time
import urllib.error
import urllib.request
from pathlib import Path

from bench.site import SiteProcess, free_port


def fetch(url: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Host": "127.0.0.1"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - our site
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def wait_until_live(base: str, site: SiteProcess, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if fetch(f"{base}/health/live")[0] == 200:
                return
        except OSError:
            pass
        assert site.process.poll() is None, site.output()[-4000:]
        time.sleep(0.3)
    raise AssertionError(f"`make serve` never answered:\n{site.output()[-4000:]}")


def test_make_serve_runs_gunicorn_with_static_files_and_a_redacted_access_log(
    tmp_path: Path,
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    data = tmp_path / "data"
    env = {"DEBUG": "0", "SECRET_KEY": secrets.token_urlsafe(50), "SECURE_SSL_REDIRECT": "0"}
    site = SiteProcess(data, port, env=env, target="serve")
    try:
        wait_until_live(base, site)
        status, page = fetch(f"{base}/accounts/login/")
        assert status == 200
        stylesheet = re.search(rb'href="(/static/[^"]+\.css)"', page)
        assert stylesheet, page[:2000]
        status, css = fetch(base + stylesheet.group(1).decode())
        assert status == 200 and css
        assert (data / "static" / "css" / "site.css").is_file(), "collectstatic ran"
        assert fetch(f"{base}/health/ready")[0] == 200, "migrated, and the broker answers"
        # DEBUG is off: an unknown page is the plain 404, no traceback or URL list.
        status, missing = fetch(f"{base}/no-such-page/")
        assert status == 404 and b"URLconf" not in missing

        secret = secrets.token_urlsafe(32)
        fetch(f"{base}/cube/runs/{secret}/")
        site.wait_for(r"/cube/runs/\[redacted\]/", timeout=30)
        assert secret not in site.output()
        assert "gunicorn" in site.output().lower()
    finally:
        site.stop()
