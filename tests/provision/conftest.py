"""The session fixtures of the installed-tool tests: the built wheel/sdist, the uv-installed tool, a bare engine."""

from tests.support.installed import dists, installed_tool  # noqa: F401
from tests.support.second_engine import bare_second_engine  # noqa: F401
