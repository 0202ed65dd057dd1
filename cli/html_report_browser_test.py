#!/usr/bin/env python3
"""ctest cli.html_report_browser: the `--html` report rendered by a real browser (Debian's Chromium,
driven headless through chromedriver with Selenium), and the picture checked pixel by pixel.

mutant-swap-query-heads exchanges query heads 0 and 1 of q_proj. On the Qwen3-0.6B TP 2 golden
(16 query heads, 8 KV heads, head_dim 128) the rendered page must show:
  - grads/q_proj#sketch and grads/o_proj#sketch: the bands of query heads 0 and 1 lit (beyond
    tolerance), the other 14 heads dark (within), the worst cell's green outline inside head 0 or 1;
  - ranks/*/grads/q_proj#sketch (head x rank): heads 0, 1 lit on rank 0, heads 2-7 dark on rank 0, heads
    8-15 dark on rank 1, and white (not held) where a rank holds no line of the head;
  - out (token x hidden channel): position 0 of both batch rows dark (one key: the query does not
    matter), every later position lit.
Colours are read from the screenshot, not from the HTML: lit cells have red >= 200 (the scale beyond
tolerance starts at #d7301f), dark cells are blue-black (red <= 60, blue > red), not-held cells white.

Exits 77 (ctest: skipped, "Not Run") when Chromium, chromedriver, Selenium or Pillow is missing;
ci/setup installs them. ATTNCHECK_SCREENSHOT=FILE also saves the whole page's screenshot (README's
picture is cut from it).

    html_report_browser_test.py ATTNCHECK GOLDEN_DATA_DIR"""
import io
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
chromium = shutil.which("chromium") or shutil.which("chromium-browser")
chromedriver = shutil.which("chromedriver")
try:
    from PIL import Image
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
except ImportError as missing:
    print(f"skipped: {missing.name} is not installed (ci/setup installs selenium and pillow from ci/requirements.txt)")
    sys.exit(SKIP)
if chromium is None or chromedriver is None:
    print("skipped: no headless browser (ci/setup installs Debian's chromium and chromium-driver)")
    sys.exit(SKIP)

attncheck, data = sys.argv[1], pathlib.Path(sys.argv[2])
failures = []


def expect(condition, what):
    if not condition:
        failures.append(what)


def lit(pixel):
    return pixel[0] >= 200


def dark(pixel):
    return pixel[0] <= 60 and pixel[2] > pixel[0]


def white(pixel):
    return min(pixel[:3]) >= 250


def marker(pixel):  # the worst cell's outline, #00e676
    return pixel[1] >= 180 and pixel[0] <= 80


with tempfile.TemporaryDirectory() as folder:
    page_path = pathlib.Path(folder) / "report.html"
    result = subprocess.run([attncheck, "golden", "check", str(data / "qwen3-0.6b_tp2.h5"), "--impl",
                             "mutant-swap-query-heads", "--html", str(page_path)], capture_output=True, text=True)
    if result.returncode != 1:
        print(f"golden check exited {result.returncode}, expected 1:\n{result.stderr}")
        sys.exit(1)

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--force-device-scale-factor=1", "--window-size=1400,1000"):
        options.add_argument(argument)
    browser = webdriver.Chrome(service=Service(chromedriver), options=options)
    try:
        browser.get(page_path.as_uri())
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(1400, height + 200)  # the whole page in one screenshot
        screenshot = Image.open(io.BytesIO(browser.get_screenshot_as_png())).convert("RGB")
        scale = screenshot.width / browser.execute_script("return window.innerWidth")
        if os.environ.get("ATTNCHECK_SCREENSHOT"):
            screenshot.save(os.environ["ATTNCHECK_SCREENSHOT"])

        def figure(tensor):
            found = browser.find_elements(By.CSS_SELECTOR, f'figure.heatmap[data-tensor="{tensor}"]')
            expect(len(found) == 1, f"{tensor}: {len(found)} maps on the page, expected 1")
            return found[0] if found else None

        def cells_of(element):
            """The cells' image as rendered: (pixels, rows, columns, pixel rect)."""
            image = element.find_element(By.CSS_SELECTOR, "image.cells")
            rect = browser.execute_script(
                "const r = arguments[0].getBoundingClientRect(); return [r.left, r.top, r.width, r.height];", image)
            left, top, width, height = (round(v * scale) for v in rect)
            pixels = screenshot.crop((left, top, left + width, top + height))
            return pixels, int(element.get_attribute("data-rows")), int(element.get_attribute("data-columns")), rect

        def band(pixels, first_row, last_row, rows):
            """Every pixel of cell rows [first_row, last_row), the worst cell's outline left out."""
            top = round(first_row * pixels.height / rows)
            bottom = round(last_row * pixels.height / rows)
            return [p for y in range(top, bottom) for x in range(pixels.width)
                    if not marker(p := pixels.getpixel((x, y)))]

        def cell_centre(pixels, row, column, rows, columns):
            return pixels.getpixel((int((column + 0.5) * pixels.width / columns),
                                    int((row + 0.5) * pixels.height / rows)))

        # Projection gradients: query-head bands.
        for tensor in ("grads/q_proj#sketch", "grads/o_proj#sketch"):
            element = figure(tensor)
            if element is None:
                continue
            pixels, rows, columns, rect = cells_of(element)
            lines_per_cell = int(element.get_attribute("data-row-bin"))
            cells_per_head = int(element.get_attribute("data-row-group")) // lines_per_cell
            expect(rows == 16 * cells_per_head, f"{tensor}: {rows} rows for 16 heads of {cells_per_head} cells")
            for head in range(16):
                head_pixels = band(pixels, head * cells_per_head, (head + 1) * cells_per_head, rows)
                lit_share = sum(map(lit, head_pixels)) / max(1, len(head_pixels))
                dark_share = sum(map(dark, head_pixels)) / max(1, len(head_pixels))
                if head in (0, 1):
                    expect(lit_share > 0.95, f"{tensor}: query head {head} is lit on {lit_share:.0%} of its pixels")
                else:
                    expect(dark_share == 1.0, f"{tensor}: query head {head} is dark on only {dark_share:.0%}")
            # The green outline sits on the worst cell, inside head 0 or 1.
            worst = element.find_element(By.CSS_SELECTOR, "rect.worst")
            box = browser.execute_script(
                "const r = arguments[0].getBoundingClientRect(); return [r.top + r.height / 2];", worst)
            head = int((box[0] - rect[1]) / rect[3] * 16)
            expect(head in (0, 1), f"{tensor}: the worst cell is outlined at query head {head}")
            x0, y0 = round(rect[0] * scale), round(rect[1] * scale)
            outline = [screenshot.getpixel((x, y)) for x in range(x0, x0 + round(rect[2] * scale))
                       for y in range(y0, y0 + round(rect[3] * scale * 2 / 16))]
            expect(any(marker(p) for p in outline), f"{tensor}: the green outline is drawn in heads 0-1")

        # Per-rank q_proj: head x rank, rank 0 holding heads 0-7 and rank 1 heads 8-15.
        element = figure("ranks/*/grads/q_proj#sketch")
        if element is not None:
            pixels, rows, columns, _ = cells_of(element)
            expect((rows, columns) == (16, 2), f"per-rank q_proj: {rows} x {columns} cells, expected 16 x 2")
            for head in range(16):
                for rank in range(2):
                    # Sample off the outline: the worst cell (head 0 or 1, rank 0) is outlined.
                    pixel = cell_centre(pixels, head, rank, rows, columns)
                    held = (head < 8) == (rank == 0)
                    want = (lit if head < 2 else dark) if held else white
                    expect(want(pixel), f"per-rank q_proj: head {head}, rank {rank} is {pixel}, expected {want.__name__}")

        # out: token rows (2 batch rows x 6 positions); position 0 sees one key and does not change.
        element = figure("out")
        if element is not None:
            pixels, rows, columns, _ = cells_of(element)
            expect(rows == 12, f"out: {rows} token rows, expected 12")
            for token in range(rows):
                token_pixels = band(pixels, token, token + 1, rows)
                share = sum(map(dark if token % 6 == 0 else lit, token_pixels)) / max(1, len(token_pixels))
                expect(share > 0.98, f"out: batch row {token // 6}, position {token % 6}: {share:.0%} as expected")
    finally:
        browser.quit()

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("html report in Chromium: the swapped query heads 0 and 1 are lit, the rest dark; position 0 of out dark")
