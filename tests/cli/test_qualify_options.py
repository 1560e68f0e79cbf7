"""`qualify`'s options refused before anything runs (exit 2, one line): `--then` takes restore or promote,
and promote needs the alias it would move."""

from __future__ import annotations

from tests.support.cli import run_cli


def test_then_promote_needs_an_alias():
    res = run_cli("qualify", "4096-131k", "--then", "promote")
    assert res.returncode == 2, res
    assert "--then promote needs --alias ALIAS" in res.stderr, res.stderr


def test_then_takes_restore_or_promote():
    res = run_cli("qualify", "4096-131k", "--alias", "ds4-flash", "--then", "later")
    assert res.returncode == 2, res
    assert "--then: expected restore or promote, got 'later'" in res.stderr, res.stderr


def test_alias_needs_an_edge():
    res = run_cli("qualify", "4096-131k", "--alias", "ds4-flash")  # the repository has no edge.yaml
    assert res.returncode == 2, res
    assert "edge.yaml" in res.stderr, res.stderr
