"""Explorer presets end to end: how soon the compare page shows the SVD bound and every result.

Starts ``panel serve explorer/app.py`` on 127.0.0.1 (a free port) and, with Debian's Chromium
through Playwright, for each preset in turn (a fresh browser context, a cold plan cache for
that workload): uploads the preset's scenario on the workload page, waits until the page says
it is loaded (and half a second more), opens the Compare page and
measures, from the click on "Compare",

* **page**: until the Compare page is built (its bound line exists, maybe "computing...");
* **bound**: until the bound line shows the SVD bound's value or why there is none
  (goal < 2 s);
* **all**: until the headline no longer says the rest is still being planned, i.e. every
  applicable mechanism that starts automatically has its row (goal < 60 s for SF1, < 20 s for
  the others; mechanisms estimated over a minute wait for "Plan anyway" and are listed);
* **slider**: release of the eps slider to the headline showing the re-scaled numbers
  (median and 95th percentile of ``--moves`` moves, milliseconds; goal p95 < 200 ms).

Reads the page from the Bokeh document (shadow DOM does not matter). Traffic stays on
127.0.0.1, each wait is bounded by ``--timeout`` seconds.

Usage::

    python benchmarks/explorer_presets.py            # SF1, SF1+, CPS, Adult, Loans
    python benchmarks/explorer_presets.py --quick    # CPS only
    python benchmarks/explorer_presets.py --preset adult_marginals --preset loans_marginals
    python benchmarks/explorer_presets.py --preset cps_marginals --moves 20 \
        --mechanisms identity,hb,hdmm-kron    # the slider alone, without the slow planners
    python benchmarks/explorer_presets.py --server-cpu --moves 10 --preset cps_marginals \
        --mechanisms identity,hdmm-kron       # no browser: web-process CPU per eps move
"""

from __future__ import annotations

import argparse
import html
import re
import statistics
import time

import numpy as np
import yaml

from explorer.server.served import REPO_ROOT, chromium_options, drag_eps_slider, serving

#: preset key -> (label, goal in seconds for every result)
PRESETS = {
    "sf1": ("SF1", 60.0),
    "sf1_plus": ("SF1+", 20.0),
    "cps_marginals": ("CPS", 20.0),
    "adult_marginals": ("Adult", 20.0),
    "loans_marginals": ("Loans", 20.0),
}
QUICK = ("cps_marginals",)
BOUND_GOAL = 2.0

#: The text of the Markdown panes with these CSS classes, from the Bokeh document.
TEXT_JS = """(cls) => {
  if (window.Bokeh === undefined || !Bokeh.documents.length) return null;
  for (const m of Bokeh.documents[0].all_models) {
    if (m.css_classes && Array.from(m.css_classes).includes(cls)) return m.text;
  }
  return null;
}"""
PAGE_BUILT_JS = "() => (" + TEXT_JS + ")('bound-status') !== null"
BOUND_SHOWN_JS = ("() => { const t = (" + TEXT_JS + ")('bound-status');"
                  " return t !== null && !t.includes('computing'); }")
ALL_DONE_JS = ("() => { const t = (" + TEXT_JS + ")('compare-headline');"
               " return t !== null && !t.includes('still planning')"
               " && !t.includes('No results yet'); }")
ARM_JS = """(before) => {
  window.__released = null;
  document.addEventListener('pointerup', () => { window.__released = performance.now(); },
                            {capture: true, once: true});
  const text = """ + TEXT_JS + """;
  window.__updated = new Promise(resolve => {
    const tick = () => {
      const now = text('compare-headline');
      if (window.__released !== null && now !== before) {
        resolve(performance.now() - window.__released);
      } else {
        requestAnimationFrame(tick);
      }
    };
    tick();
  });
}"""

#: The armed latency, or null after ``ms`` milliseconds without a headline change.
UPDATED_JS = ("(ms) => Promise.race([window.__updated,"
              " new Promise(resolve => setTimeout(() => resolve(null), ms))])")


def plain(text: str | None) -> str:
    """A Markdown pane's text without its HTML markup."""
    return re.sub(r"<[^>]*>", "", html.unescape(html.unescape(text or ""))).strip()


def measure(browser, base: str, key: str, moves: int, timeout_s: float,
            mechanisms: list[str] | None = None) -> dict:
    """Load preset ``key``, open Compare: seconds to bound and to all results, slider ms.

    ``mechanisms`` replaces the preset's list (a quicker slider measurement)."""
    from explorer.presets import build_preset

    spec = build_preset(key)
    if mechanisms:
        spec["mechanisms"] = mechanisms
    scenario = yaml.safe_dump(spec, sort_keys=False).encode()
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(timeout_s * 1000)
    page = context.new_page()
    try:
        page.goto(f"{base}/app?page=builder", wait_until="load")
        page.locator(".spec-upload input[type=file]").first.set_input_files(
            files=[{"name": f"{key}.yaml", "mimeType": "text/yaml", "buffer": scenario}])
        # Loaded once the builder says so: the stats line already reads "... cells" for the
        # workload the page opened with, and a census-sized file takes the server a second or
        # more to parse (Compare clicked meanwhile waited for it, or opened the old workload).
        page.locator(".builder-message").first.filter(has_text=f"Loaded {key}.yaml.").wait_for()
        page.wait_for_timeout(500)
        start = time.perf_counter()
        page.locator(".site-nav").get_by_role("link", name="Compare").click()
        page.wait_for_function(PAGE_BUILT_JS, polling=50)
        built = time.perf_counter() - start
        page.wait_for_function(BOUND_SHOWN_JS, polling=50)
        bound = time.perf_counter() - start
        bound_text = page.evaluate(TEXT_JS, "bound-status")
        try:
            page.wait_for_function(ALL_DONE_JS, polling=100)
            done: float | None = time.perf_counter() - start
        except Exception:  # Playwright's TimeoutError: reported, the other presets go on
            done = None
        headline = page.evaluate(TEXT_JS, "compare-headline") or ""
        sliders = []
        if done is not None:
            for i in range(moves):
                page.evaluate(ARM_JS, page.evaluate(TEXT_JS, "compare-headline"))
                # right and left by turns, so that many moves stay inside the slider
                drag_eps_slider(page, (12 + 3 * (i // 2)) * (1 if i % 2 == 0 else -1))
                latency = page.evaluate(UPDATED_JS, timeout_s * 1000)
                if latency is None:
                    raise TimeoutError(f"{key}: the headline did not change within "
                                       f"{timeout_s:.0f} s of slider move {i + 1}")
                sliders.append(latency)
                page.wait_for_timeout(500)
        return {"page": built, "bound": bound, "done": done, "bound_text": bound_text,
                "headline": headline, "sliders": sliders}
    finally:
        context.close()


def server_cpu_per_move(key: str, moves: int, mechanisms: list[str] | None) -> list[float]:
    """CPU milliseconds the web process spends on each eps move of a compare page (no
    browser: the page's Bokeh models are built in this process, which load disturbs far less
    than wall time). Plans in this process first."""
    from bokeh.document import Document

    from explorer.pages.compare import ComparePage
    from explorer.presets import build_preset
    from explorer.session import Session

    session = Session()
    session.apply_draft(build_preset(key))
    if mechanisms:
        session.mechanisms = mechanisms
    session.compare_now()
    ComparePage(session=session).__panel__().get_root(Document())
    cpu = []
    for i in range(moves):
        start = time.process_time()
        session.privacy.epsilon = round(0.5 + 0.05 * i, 3)
        cpu.append(1e3 * (time.process_time() - start))
    return cpu


def p95(values: list[float]) -> float:
    """The 95th percentile (linear interpolation between order statistics)."""
    return float(np.percentile(values, 95))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the CPS preset only")
    parser.add_argument("--preset", action="append", choices=tuple(PRESETS),
                        help="measure only this preset (repeatable; default: all)")
    parser.add_argument("--moves", type=int, default=3, help="eps slider moves per preset")
    parser.add_argument("--mechanisms", type=lambda text: text.split(","),
                        help="compare only these (comma-separated), e.g. identity,hdmm-kron "
                             "for a quick slider measurement; default: the preset's")
    parser.add_argument("--timeout", type=float, default=180.0,
                        help="seconds to wait for each step (default 180)")
    parser.add_argument("--server-cpu", action="store_true",
                        help="no browser: CPU ms per eps move of a compare page built in this "
                             "process (plans there first)")
    args = parser.parse_args(argv)
    if args.moves < 0 or args.timeout <= 0:
        parser.error("--moves must be >= 0 and --timeout > 0")
    keys = tuple(args.preset) if args.preset else QUICK if args.quick else tuple(PRESETS)
    if args.server_cpu:
        print(f"{'preset':8s} {'CPU ms per eps move: median / p95 / max':>40s}")
        for key in keys:
            cpu = server_cpu_per_move(key, max(args.moves, 1), args.mechanisms)
            print(f"{PRESETS[key][0]:8s} {statistics.median(cpu):12.0f} / {p95(cpu):.0f} / "
                  f"{max(cpu):.0f}", flush=True)
        return
    from playwright.sync_api import sync_playwright

    log_path = REPO_ROOT / "test-results" / "explorer-presets.log"
    try:
        options = chromium_options()
    except FileNotFoundError as exc:
        parser.error(str(exc))
    print(f"{'preset':8s} {'page s':>7s} {'bound s':>8s} {'goal':>5s} {'all s':>8s} {'goal':>5s} "
          f"{'slider ms median / p95':>24s}  bound / headline")
    with serving(log_path) as app, sync_playwright() as playwright:
        browser = playwright.chromium.launch(**options)
        base = app.url
        for key in keys:
            label, goal = PRESETS[key]
            r = measure(browser, base, key, args.moves, args.timeout, args.mechanisms)
            done = f"{r['done']:.1f}" if r["done"] is not None else "timeout"
            slider = (f"{statistics.median(r['sliders']):.0f} / {p95(r['sliders']):.0f}"
                      if r["sliders"] else "-")
            times = f"{r['page']:7.2f} {r['bound']:8.2f} {BOUND_GOAL:5.0f}"
            texts = f"{plain(r['bound_text'])[:60]} / {plain(r['headline'])[-80:]}"
            print(f"{label:8s} {times} {done:>8s} {goal:5.0f} {slider:>24s}  {texts}",
                  flush=True)
        browser.close()


if __name__ == "__main__":
    main()
