"""Which skips a CI run may make (tests/conftest.py turns every other skip under CI=true into a
failure; docs/testing.md lists the allowed ones)."""

from __future__ import annotations

# The skips CI may make, each with why (docs/testing.md): anything else that skips under CI=true fails.
CI_SKIP_ALLOWED = {
    # edge.yaml pins the Caddy image made from Debian's caddy and ca-certificates packages of the
    # versions its comment names; a machine with other versions makes another tag, rightly.
    "tests/edge/test_example.py::test_the_example_pin_is_what_a_machine_with_the_named_packages_makes": (
        "the pin is checked on a machine with exactly the named packages"
    ),
}


def ci_skip_fails(report, item, env) -> bool:
    """Under CI=true, any skip (at run time or by a skipif mark, of an engine test too) of a test not
    in CI_SKIP_ALLOWED; an xfail stays an xfail."""
    return (
        env.get("CI") == "true"
        and report.skipped
        and not hasattr(report, "wasxfail")
        and item.nodeid not in CI_SKIP_ALLOWED
    )
