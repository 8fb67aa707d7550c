"""The site on a phone (390 × 844) and at a laptop's 1280 px, in a real browser on the real
`make run`: an admin opens an episode run on the arithmetic-mc version page and the scripted
example agent plays it, so that every main page has something to show; then, on each page, the
top bar's elements all lie inside the viewport (its links behind a Menu button that opens them,
by mouse and keyboard), no page is wider than the viewport, a wide table shows a shadow at the
edge it scrolls towards, the pass-rate chart keeps 12 px text and a refused upload's problems
stack. Without JavaScript the links wrap instead, all shown. At 1280 px the bar shows its links
in one row and no Menu button. Screenshots (phone-*.png, desktop-*.png) go to
tests/e2e/screenshots/."""

from __future__ import annotations

import io
import json
import re

from PIL import Image, ImageStat

from tests.e2e.conftest import SCREENSHOTS, admin_password, run_example_agent

PACK = "arithmetic-mc"
TASKS = 5
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}

# The shown elements matching a selector that lie (partly) outside the viewport, as
# "TAG text left–right"; below the fold counts only when `vertical` is set.
OUTSIDE_VIEWPORT = """([selector, vertical]) => [...document.querySelectorAll(selector)]
  .filter((el) => el.getClientRects().length > 0)
  .map((el) => [el, el.getBoundingClientRect()])
  .filter(([, box]) => box.left < 0 || box.right > window.innerWidth
    || (vertical && (box.top < 0 || box.bottom > window.innerHeight)))
  .map(([el, box]) => `${el.tagName} ${el.textContent.trim()} ${box.left}–${box.right}`)"""

# The links and buttons that a tap at their centre would not reach (covered, or not shown).
NOT_CLICKABLE = """(selector) => [...document.querySelectorAll(selector)].filter((el) => {
  const box = el.getBoundingClientRect();
  if (box.width === 0 || box.height === 0) return true;
  const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
  return !hit || !(hit === el || el.contains(hit));
}).map((el) => el.textContent.trim())"""

# Why a page is too wide: the first elements reaching past the viewport that no scrolling
# frame clips (an element inside a table's frame may, it scrolls there).
TOO_WIDE = """() => {
  const clipped = (el) => {
    for (let up = el.parentElement; up; up = up.parentElement) {
      if (getComputedStyle(up).overflowX !== "visible") return up !== document.documentElement
        && up !== document.body;
    }
    return false;
  };
  return [...document.querySelectorAll("body *")]
    .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 0.5 && !clipped(el))
    .slice(0, 8)
    .map((el) => `${el.tagName}.${el.className} ${Math.round(el.getBoundingClientRect().right)}`);
}"""

# The vertical middle of each element matching a selector.
ROW_MIDDLES = """(selector) => [...document.querySelectorAll(selector)]
  .map((el) => el.getBoundingClientRect()).map((box) => (box.top + box.bottom) / 2)"""

# The index of the table frame whose table overflows it the most.
WIDEST_FRAME = """() => {
  const frames = [...document.querySelectorAll(".table-wrap")];
  const overflow = frames.map((el) => el.scrollWidth - el.clientWidth);
  return overflow.indexOf(Math.max(...overflow));
}"""

PAGE_WIDTH = "() => [document.documentElement.scrollWidth, window.innerWidth]"

BAR_PARTS = ".topbar, .topbar *"
MENU_ITEMS = ".topbar-menu a, .topbar-menu button"


def assert_fits(page, name: str) -> None:
    """No horizontal scrolling of the whole page (measured once its stylesheet has loaded: a
    page measured before it is laid out unwrapped, as a loaded machine once showed)."""
    page.wait_for_load_state("load")
    scroll_width, inner_width = page.evaluate(PAGE_WIDTH)
    assert scroll_width <= inner_width, (name, scroll_width, inner_width, page.evaluate(TOO_WIDE))


def check_phone_page(page, name: str) -> None:
    """On a phone: the page fits, the closed bar shows only its name and the Menu button, and
    the opened menu's every link is inside the viewport and reachable by a tap."""
    from playwright.sync_api import expect

    page.evaluate("window.scrollTo(0, 0)")
    assert_fits(page, name)
    button = page.locator(".topbar .menu-toggle")
    expect(button).to_be_visible()
    expect(button).to_have_attribute("aria-expanded", "false")
    expect(page.locator(".topbar-menu")).to_be_hidden()
    assert page.evaluate(OUTSIDE_VIEWPORT, [BAR_PARTS, True]) == [], name
    page.screenshot(path=SCREENSHOTS / f"phone-{name}.png", full_page=True)

    button.click()
    expect(button).to_have_attribute("aria-expanded", "true")
    expect(page.locator(".topbar-menu")).to_be_visible()
    expect(page.locator(".topbar-menu a", has_text="Guides")).to_be_visible()
    assert page.evaluate(OUTSIDE_VIEWPORT, [BAR_PARTS, True]) == [], name
    assert page.evaluate(NOT_CLICKABLE, MENU_ITEMS) == [], name
    assert_fits(page, f"{name} (menu open)")
    button.click()
    expect(page.locator(".topbar-menu")).to_be_hidden()


def check_desktop_page(page, name: str) -> None:
    """At 1280 px: no Menu button, every link of the bar shown on one row, the page fits."""
    from playwright.sync_api import expect

    assert_fits(page, name)
    expect(page.locator(".topbar .menu-toggle")).to_be_hidden()
    assert page.evaluate(OUTSIDE_VIEWPORT, [BAR_PARTS, True]) == [], name
    assert page.evaluate(NOT_CLICKABLE, MENU_ITEMS) == [], name
    middles = page.evaluate(ROW_MIDDLES, ".topbar-menu > a")
    assert max(middles) - min(middles) <= 2, (name, middles)  # one row
    page.screenshot(path=SCREENSHOTS / f"desktop-{name}.png", full_page=True)


def edge_shading(frame) -> tuple[float, float]:
    """How much darker than white (0: white) the 8 px inside each side edge of a table's
    frame are. The table itself is made invisible for the picture (it keeps its size and
    scroll position), so that only what the frame paints is measured, not the cells' text."""
    frame.evaluate("(el) => { el.querySelector('table').style.visibility = 'hidden'; }")
    image = Image.open(io.BytesIO(frame.screenshot())).convert("L")
    frame.evaluate("(el) => { el.querySelector('table').style.visibility = ''; }")

    def shading(left: int) -> float:
        strip = image.crop((left, 2, left + 8, image.height - 2))  # inside the 1 px border
        return 255 - ImageStat.Stat(strip).mean[0]

    return shading(2), shading(image.width - 10)


def check_scroll_shadows(page) -> None:
    """The run page's widest table scrolls inside its frame: a shadow darkens the edge with
    more to see, and moves to the other edge once scrolled to the end."""
    frame = page.locator(".table-wrap").nth(page.evaluate(WIDEST_FRAME))
    overflow = frame.evaluate("(el) => el.scrollWidth - el.clientWidth")
    assert overflow > 20, "expected a table wider than the phone on the run page"
    left, right = edge_shading(frame)
    assert right > 10 and left < 2, (left, right)  # more to the right: that edge is shaded
    frame.evaluate("(el) => { el.scrollLeft = el.scrollWidth; }")
    left, right = edge_shading(frame)
    assert left > 10 and right < 2, (left, right)  # at the end: the shadow is on the left
    if overflow > 80:  # in the middle, away from both ends: both edges
        frame.evaluate("(el) => { el.scrollLeft = (el.scrollWidth - el.clientWidth) / 2; }")
        left, right = edge_shading(frame)
        assert left > 10 and right > 10, (left, right)
    frame.evaluate("(el) => { el.scrollLeft = 0; }")


def check_phone_chart(page) -> None:
    """The pass-rate chart on a phone: the narrow layout, drawn at (nearly) its own size so
    that its 12 px text is not scaled down, and inside the viewport."""
    from playwright.sync_api import expect

    expect(page.locator("svg.family-chart")).to_be_hidden()
    chart = page.locator("svg.family-chart-narrow")
    expect(chart).to_be_visible()
    scale = chart.evaluate("(el) => el.getBoundingClientRect().width / el.viewBox.baseVal.width")
    assert scale >= 0.9, scale
    assert page.evaluate(OUTSIDE_VIEWPORT, ["svg.family-chart-narrow *", False]) == []


def check_keyboard(page) -> None:
    """The menu by keyboard: Enter on the focused button opens it, Tab reaches its first link,
    Escape closes it and gives the focus back to the button."""
    from playwright.sync_api import expect

    button = page.locator(".topbar .menu-toggle")
    button.focus()
    page.keyboard.press("Enter")
    expect(button).to_have_attribute("aria-expanded", "true")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.closest('.topbar-menu') !== null")
    page.keyboard.press("Escape")
    expect(button).to_have_attribute("aria-expanded", "false")
    expect(page.locator(".topbar-menu")).to_be_hidden()
    expect(button).to_be_focused()


def check_upload_errors(page, base: str) -> None:
    """A refused upload on a phone lists every problem of one pass (a manifest field, a line
    that is not JSON, a task missing a field), each naming its file, line and field; the
    problems stack, each one's message and quoted line (its column marked) inside the
    viewport; the page still fits."""
    from playwright.sync_api import expect

    page.goto(f"{base}/upload/")
    manifest = b"id: narrow-typo\nversion: '1'\n"
    good = json.dumps(
        {
            "id": "q0",
            "family": "multiple_choice",
            "input": {"question": "?", "choices": ["a", "b"]},
            "eval": {"answer": "A"},
        }
    )
    not_json = (
        '{"id": "q1", "family": "multiple_choice", "input": {"question": "' + "x" * 120 + '"},}'
    )
    no_choices = json.dumps(
        {
            "id": "q2",
            "family": "multiple_choice",
            "input": {"question": "?"},
            "eval": {"answer": "A"},
        }
    )
    for field, name, content in (
        ("#id_manifest", "manifest.yaml", manifest),
        ("#id_tasks", "tasks.jsonl", "\n".join((good, not_json, no_choices)).encode() + b"\n"),
    ):
        page.set_input_files(
            field, files=[{"name": name, "mimeType": "text/plain", "buffer": content}]
        )
    page.click("text=Upload and compile")
    expect(page.locator(".form-errors")).to_contain_text("3 problems found")
    rows = page.locator(".form-errors table.problems tbody tr")
    expect(rows).to_have_count(3)
    named = [
        [cell.strip() for cell in row.locator("td").all_inner_texts()[:3]] for row in rows.all()
    ]
    assert named == [
        ["manifest.yaml", "2", "version"],
        ["tasks.jsonl", "2", ""],
        ["tasks.jsonl", "3", "input.choices"],
    ], named
    expect(page.locator(".form-errors pre.excerpt").first).to_contain_text('"},}')
    assert_fits(page, "upload errors")
    cells = ".form-errors table.problems td, .form-errors pre.excerpt"
    assert page.evaluate(OUTSIDE_VIEWPORT, [cells, False]) == []
    page.screenshot(path=SCREENSHOTS / "phone-upload-errors.png", full_page=True)


def play_an_episode_run(page, base: str) -> str:
    """An episode run of the example pack played by the scripted agent; returns the run
    page's URL once its episodes are scored."""
    from playwright.sync_api import expect

    page.goto(f"{base}/packs/{PACK}/v1/")
    page.fill("#live_agent_name", "scripted agent")
    page.locator("#run-live").get_by_role("button", name="Open an episode run").click()
    expect(page.locator("h1")).to_contain_text("is open")
    url = page.locator("#benchmark-url").inner_text().strip()
    assert_fits(page, "episode-run-opened")
    page.screenshot(path=SCREENSHOTS / "phone-episode-run-opened.png", full_page=True)
    page.get_by_role("link", name="Go to the run page ›").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run_example_agent(url)
    expect(page.locator("#progress .progress-head")).to_contain_text(
        f"{TASKS} of {TASKS} tasks finished (100 %)", timeout=60_000
    )
    page.reload()
    return page.url


def test_every_main_page_fits_a_phone_and_its_menu_opens_there(site, browser):
    from playwright.sync_api import expect

    process, base = site
    password = admin_password(process)
    phone = browser.new_page(viewport=PHONE)
    phone.goto(f"{base}/")
    check_phone_page(phone, "sign-in")
    phone.fill("#id_username", "admin")
    phone.fill("#id_password", password)
    phone.click("main button[type=submit]")
    phone.wait_for_url(f"{base}/")

    run_url = play_an_episode_run(phone, base)
    result_link = phone.locator("#episodes table.episodes-table tbody tr td a").first
    result_url = base + result_link.get_attribute("href")
    task_id = result_link.inner_text().strip()
    pages = {
        "home": f"{base}/",
        "packs": f"{base}/packs/",
        "pack": f"{base}/packs/{PACK}/",
        "version": f"{base}/packs/{PACK}/v1/",
        "runs": f"{base}/runs/",
        "run": run_url,
        "result": result_url,
        "trajectory": f"{result_url}trajectory/",
        "task": f"{base}/packs/{PACK}/v1/tasks/{task_id}",
        "leaderboards": f"{base}/leaderboards/",
        "leaderboard": f"{base}/leaderboards/{PACK}/v1/",
        "upload": f"{base}/upload/",
        "submit": f"{base}/runs/submit/",
        "guides": f"{base}/docs/",
        "guide": f"{base}/docs/authors/",
        "audit-log": f"{base}/audit/",
        "operations": f"{base}/operations/",
    }
    for name, url in pages.items():
        phone.goto(url, wait_until="networkidle")  # with what htmx loads after
        if name == "run":  # the episodes table comes by htmx: checked with the rest
            expect(phone.locator("#episodes table.episodes-table tbody tr")).to_have_count(TASKS)
        if name in ("result", "trajectory"):
            expect(phone.locator("#trajectory ol.timeline > li.step")).to_have_count(3)
        check_phone_page(phone, name)
        if name == "run":
            check_scroll_shadows(phone)
            check_phone_chart(phone)

    check_upload_errors(phone, base)

    # The menu works by keyboard, and a link in it leads where it says.
    phone.goto(f"{base}/")
    check_keyboard(phone)
    phone.locator(".topbar .menu-toggle").click()
    phone.screenshot(path=SCREENSHOTS / "phone-menu-open.png")
    phone.locator(".topbar-menu a", has_text="Runs").click()
    phone.wait_for_url(f"{base}/runs/")

    # Without JavaScript there is no Menu button: every link is shown, wrapped, and fits.
    context = browser.new_context(viewport=PHONE, java_script_enabled=False)
    context.add_cookies(phone.context.cookies())
    bare = context.new_page()
    bare.goto(run_url)
    expect(bare.locator(".topbar .menu-toggle")).to_be_hidden()
    expect(bare.locator(".topbar-menu a", has_text="Leaderboards")).to_be_visible()
    assert bare.evaluate(OUTSIDE_VIEWPORT, [BAR_PARTS, True]) == []
    assert bare.evaluate(NOT_CLICKABLE, MENU_ITEMS) == []
    assert_fits(bare, "run without JavaScript")
    bare.screenshot(path=SCREENSHOTS / "phone-run-no-js.png", full_page=True)
    context.close()

    # A laptop: the same pages, the links in the bar, no Menu button, the wide chart.
    desktop = browser.new_context(viewport=DESKTOP)
    desktop.add_cookies(phone.context.cookies())
    wide = desktop.new_page()
    for name, url in pages.items():
        wide.goto(url, wait_until="networkidle")
        check_desktop_page(wide, name)
        if name == "run":
            expect(wide.locator("svg.family-chart")).to_be_visible()
            expect(wide.locator("svg.family-chart-narrow")).to_be_hidden()
    desktop.close()
