"""`composegen docs [TOPIC]`: the documentation pages the wheel carries, so a `--help` that says
"composegen docs edge" works where no checkout is (an installed tool)."""

from __future__ import annotations

import re

import typer

from composegen.cli.app import app
from composegen.errors import BadInput
from composegen.output import out
from composegen.project import docs_dir

INDEX = "README"  # docs/README.md: the shelves; `composegen docs` lists the topics instead


def topics() -> dict[str, str]:
    """topic -> the page's title (its first `# ` line), in name order."""
    found = {}
    for page in sorted(docs_dir().glob("*.md")):
        if page.stem == INDEX:
            continue
        lines = page.read_text(encoding="utf-8").splitlines()
        found[page.stem] = next((x[2:] for x in lines if x.startswith("# ")), page.stem)
    return found


@app.command()
def docs(
    topic: str | None = typer.Argument(
        None, help="A page's name, e.g. install, edge, campaign; without it: the list of pages."
    ),
) -> None:
    """Print a documentation page (Markdown) from the ones shipped with composegen.

    Example: composegen docs install
    """
    known = topics()
    if topic is None:  # the developers' shelf of docs/README.md apart
        shelf = (docs_dir() / f"{INDEX}.md").read_text(encoding="utf-8").partition("## Develop")[2]
        developer = set(re.findall(r"\]\(([\w-]+)\.md\)", shelf))
        width = max(map(len, known))
        for heading, dev in (("for people using composegen:", False), ("for developers:", True)):
            out(heading)
            out(
                "".join(
                    f"  {n:<{width}}  {t}\n" for n, t in known.items() if (n in developer) == dev
                )
            )
        out("read one: composegen docs TOPIC")
        return
    name = topic.removesuffix(".md").removeprefix("docs/")
    if name not in known:
        raise BadInput(
            f"docs: no page {topic!r}", hint=f"one of: {', '.join(known)} (`composegen docs`)"
        )
    out((docs_dir() / f"{name}.md").read_text(encoding="utf-8").rstrip("\n"))
