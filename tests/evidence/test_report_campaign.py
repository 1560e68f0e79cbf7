"""`composegen report CAMPAIGN`: the arms named by role (control / candidate / bracket), never
`8192-131k (1)`; the decision with its why and the Outcome first; a PNG summary next to the page (chat
tools preview images, not HTML); seen in headless chromium. The campaign is the seed's recorded arms
(tests/support/campaigns.py: no engine)."""

from __future__ import annotations

import io
import re
from html import unescape

from PIL import Image

from composegen.campaign import decision
from tests.support.campaigns import seeded_campaign
from tests.support.cdp import Chromium
from tests.support.cli import run_cli

DECISION_BORDER = (0x1D, 0x4E, 0xD8)  # .decision's border colour in reportpage.CSS


def _report(project, name: str, page):
    res = run_cli("--root", str(project.root), "report", name, "--html", str(page), timeout=180)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [str(page), str(page.with_suffix(".png"))]
    return page.read_text(encoding="utf-8")


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_the_campaign_report_names_roles_and_opens_with_decision_and_outcome(tmp_path):
    project, directory = seeded_campaign(tmp_path, plant_config=False)
    page = tmp_path / "report.html"
    html = _report(project, directory.name, page)
    text = _text(html)
    for role in ("control 8192-131k", "candidate 4096-131k", "bracket 8192-131k"):
        assert role in text, role
    assert "(1)" not in text and "(3)" not in text and "(a)" not in text
    # the A/B tables say which arm each column is
    assert "control 8192-131k vs candidate 4096-131k" in text
    assert "Measurement control 8192-131k candidate 4096-131k Change" in text
    # first the decision (not made yet: the command that makes it), then the Outcome, then the rest
    head = text.split("Provenance", 1)[0]
    command = f"composegen campaign decide {directory.name} --promote|--no-promotion|--fallback"
    assert f"Decision: undecided: {command} --why" in head and "`" not in head, head
    assert f"<code>{command} --why &quot;…&quot;</code>" in html  # code, not literal backticks
    md = run_cli("--root", str(project.root), "report", directory.name).stdout
    provenance = md.split("### Provenance", 1)[1].strip().split("\n\n")[0]
    assert "\\`" not in provenance and "`" not in provenance, provenance  # no escaped code spans
    outcome = (directory / "campaign.md").read_text().split("## Outcome", 1)[1].split("\n## ")[0]
    first = " ".join(outcome.strip().split("\n\n")[0].split())
    assert "Outcome" in head and first in head, (first, head)

    why = "the candidate's KV pool is larger at equal activation"
    despite = "tools is fixed by the next arm's parser"
    decision.decide(project, directory.name, "promote", why, despite_gates=despite)
    text = _text(_report(project, directory.name, page))
    head = text.split("Provenance", 1)[0]
    assert "Decision: promote 4096-131k (decided " in head and f"Why: {why}" in head, head
    assert f"(promoted despite failed gates: {despite})" in head
    assert "Functional gates FAILED: candidate failed tools" in head


def test_the_png_summary_is_a_real_image_with_every_arm(tmp_path):
    project, directory = seeded_campaign(tmp_path, plant_config=False)
    page = tmp_path / "out" / "campaign.html"
    page.parent.mkdir()
    _report(project, directory.name, page)
    png = page.with_suffix(".png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    image = Image.open(io.BytesIO(png))
    image.verify()
    image = Image.open(io.BytesIO(png)).convert("RGB")
    assert image.width >= 800 and image.height >= 300, image.size
    colours = image.getcolors(maxcolors=1 << 20) or []
    white = sum(n for n, rgb in colours if rgb == (255, 255, 255))
    assert len(colours) > 20 and white < 0.95 * image.width * image.height


def test_the_png_summary_shows_the_failed_gates(tmp_path, monkeypatch):
    from matplotlib.colors import to_rgb
    from matplotlib.figure import Figure

    from composegen.evidence import reportpng, runreport

    project, directory = seeded_campaign(tmp_path, plant_config=False)
    arms = [str(directory / arm) for arm in ("control", "candidate")]
    report = runreport.gather(arms, root=project.root)
    drawn = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: drawn.append(fig))
    reportpng.render_png(report)
    title = drawn[0]._suptitle.get_text()  # the seed's candidate fails `tools` (its parser)
    assert "gates: 8192-131k 2/2 · 4096-131k 1/2 FAILED: tools" in title, title
    bars = drawn[0].axes[0].patches
    assert [b.get_facecolor()[:3] for b in bars] == [
        to_rgb(reportpng.PASSED),
        to_rgb(reportpng.FAILED),
    ]


def test_a_profile_with_no_run_names_report_campaign(tmp_path):
    project, directory = seeded_campaign(tmp_path, plant_config=False)
    res = run_cli("--root", str(project.root), "report", "8192-131k")
    assert res.returncode == 2, res.stderr
    assert "composegen report CAMPAIGN" in res.stderr and directory.name in res.stderr
    assert "report CAMPAIGN" in " ".join(run_cli("report", "--help").stdout.split())


def test_chromium_shows_the_decision_at_the_top_without_errors(tmp_path):
    project, directory = seeded_campaign(tmp_path, plant_config=False)
    page = tmp_path / "report.html"
    _report(project, directory.name, page)
    (tmp_path / "chromium").mkdir()
    with Chromium.launch(tmp_path / "chromium") as browser:
        seen = browser.open(page, height=900)
    assert seen.console_errors == [] and seen.requests == [page.resolve().as_uri()]
    image = Image.open(io.BytesIO(seen.screenshot)).convert("RGB")
    top = image.crop((0, 0, image.width, 400))
    # the decision box is drawn in the first screenful
    assert any(rgb == DECISION_BORDER for _, rgb in top.getcolors(maxcolors=1 << 20) or [])
