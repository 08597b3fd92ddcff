"""`korch compile` writes report.html into the artifact: self-contained, one kernel group per kernel.

The SVG part of the page is parsed as XML and its <g class="kernel"> groups counted against
plan.json's kernels; nothing may be fetched (no http(s) reference besides the SVG namespaces, no
script, no stylesheet link). When chromium is on PATH the page is also rendered headless.
"""
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

KORCH = os.environ.get("KORCH_BIN", str(Path(__file__).resolve().parents[2] / "build" / "korch"))
SVG_NS = "{http://www.w3.org/2000/svg}"
XMLNS = ('xmlns="http://www.w3.org/2000/svg"', 'xmlns:xlink="http://www.w3.org/1999/xlink"')


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    env = dict(os.environ, KORCH_CACHE_DIR=str(tmp / "cache"), KORCH_PROGRESS="0")
    out = tmp / "art"
    r = subprocess.run([KORCH, "compile", "builtin:tiny_convnet", "--cost", "analytic", "-q", "-o", str(out)],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    return out


def test_report_is_written_and_self_contained(artifact):
    html = (artifact / "report.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert html.rstrip().endswith("</html>")
    rest = html
    for ns in XMLNS:
        rest = rest.replace(ns, "")
    assert "http://" not in rest and "https://" not in rest
    for bad in ("<script", "<link", "@import", "url(", "<iframe", "<img"):
        assert bad not in html, bad
    plan = json.loads((artifact / "plan.json").read_text())
    assert html.count('<tr id="step-') == len(plan["kernels"])
    offered = plan["rewrites"]["offered"]  # the rewrite sites offered as choices, and those chosen
    assert (f"{len(plan['rewrites']['chosen'])} of {offered} sites chosen" if offered else "none offered") in html
    # The greedy baseline is recorded in plan.json and shown.
    assert plan["cost"]["greedy_s"] > 0
    assert plan["greedy"]["groups"] >= 1


def test_svg_has_one_kernel_group_per_kernel(artifact):
    html = (artifact / "report.html").read_text(encoding="utf-8")
    if "<svg" not in html:
        assert shutil.which("dot") is None, "dot is installed but the report has no drawing"
        assert "not installed (apt install graphviz)" in html
        pytest.skip("Graphviz not installed (apt install graphviz): the report has no drawing")
    m = re.search(r"<svg\b.*?</svg>", html, re.S)
    root = ET.fromstring(m.group(0))
    kernels = [g for g in root.iter(SVG_NS + "g") if g.get("class") == "kernel"]
    plan = json.loads((artifact / "plan.json").read_text())
    assert len(kernels) == len(plan["kernels"])
    assert sorted(int(g.get("data-step")) for g in kernels) == list(range(len(plan["kernels"])))
    # Every primitive instance is a node inside its kernel's group.
    for g in kernels:
        step = int(g.get("data-step"))
        # dot nests nodes beside clusters, not inside: count by the ids it gave them.
        ids = [n.get("id") for n in root.iter(SVG_NS + "g") if (n.get("id") or "").startswith(f"k{step}-p")]
        assert len(ids) == len(plan["kernels"][step]["primitives"])


def test_chromium_renders_it(artifact, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium not installed (apt install chromium)")
    png = tmp_path / "report.png"
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={png}",
                        "--window-size=1400,2000", (artifact / "report.html").resolve().as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert png.exists()
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 10_000, len(data)
    # Kept next to the binary (build/report-screenshot.png) for a person to look at.
    shutil.copy(png, Path(KORCH).resolve().parent / "report-screenshot.png")
