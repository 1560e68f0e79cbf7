"""docs/contributing.md's table of rooms is the architecture test's: every room with its rank and its door
(`__all__`), and nothing else — a room added, re-ranked or given a wider door shows up here as a failure."""

from __future__ import annotations

import re

from tests.support.helpers import REPO
from tests.test_architecture import RANKS, declared_door, rooms_with_doors

DOC = (REPO / "docs/contributing.md").read_text()
ROW = re.compile(
    r"^\| `(?P<room>[\w]+)(?P<kind>/|\.py)` \| (?P<rank>[\d.]+) \| (?P<door>[^|]+) \|", re.M
)


def documented() -> dict[str, tuple[float, list[str] | None]]:
    rooms = {}
    for m in ROW.finditer(DOC):
        door = None if m["door"].strip() == "the module" else re.findall(r"`(\w+)`", m["door"])
        rooms[m["room"]] = (float(m["rank"]), door)
    return rooms


def test_the_rooms_table_is_the_architecture_tests():
    doors = rooms_with_doors()
    actual = {
        room: (float(rank), declared_door(doors[room]) if room in doors else None)
        for room, rank in RANKS.items()
    }
    assert documented() == actual


def test_the_budgets_named_exist():
    sources = "".join(
        (REPO / "tests" / name).read_text()
        for name in (
            "test_architecture.py",
            "test_typed_results.py",
            "test_house_figures.py",
            "test_house_duplicates.py",
        )
    )
    for name in re.findall(r"`([A-Z_]+_BUDGET)`", DOC):
        assert re.search(rf"^{name} = \d+", sources, re.M), name
    assert "max-complexity" in (REPO / "pyproject.toml").read_text()


def test_the_readme_map_names_every_room_and_links_the_docs():
    readme = (REPO / "README.md").read_text()
    block = readme.split("## Where things live", 1)[1].split("```", 2)[1]
    rooms = {p.parent.name for p in (REPO / "composegen").glob("*/__init__.py")}
    assert {room for room in rooms if f"  {room}/" not in block} == set()
    assert "(docs/README.md)" in readme and "(docs/campaign.md)" in readme
    index = (REPO / "docs/README.md").read_text()
    pages = {p.name for p in (REPO / "docs").glob("*.md")} - {"README.md"}
    assert {page for page in pages if f"]({page})" not in index} == set()


def test_the_kubernetes_page_links_the_rendered_files_instead_of_inlining_them():
    page = (REPO / "docs/kubernetes.md").read_text()
    assert len(page.encode()) <= 8 << 10
    assert "(../out/4096-131k/k8s/)" in page and "kind: Deployment" not in page
