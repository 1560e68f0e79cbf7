"""Hostile profile text through the Kubernetes renderer: whatever a profile's strings hold (`$(VAR)`, `$$`,
quotes, YAML syntax, non-ASCII, U+2028), the files read back as the objects built, each value reaches the
container as written (Kubernetes' expansion undone), and the result still passes the API schema."""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from composegen.errors import BadInput
from composegen.k8s import expansion, output
from composegen.profiles import resolve as profiles
from composegen.project import Project
from tests.k8s.conftest import validate
from tests.support import profiles as docs

TEXT = st.one_of(
    st.text(
        alphabet=st.sampled_from(list("ab$()#:'\"{}[]&*!|>%@`,- \\\u2028\u00e9\u0085")),
        min_size=1,
        max_size=24,
    ),
    st.sampled_from(["yes", "null", "~", "0x1F", "1e3", "$(HOME)", "$$(HOME)", "a\nb\n"]),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    value=TEXT,
    served=st.text(alphabet=st.sampled_from(list("ab$()#:'\"{}&*!%@")), min_size=1, max_size=16),
)
def test_hostile_strings_reach_the_container_as_written(tmp_path_factory, value, served):
    root = docs.project(
        tmp_path_factory.mktemp("p"),
        docs.edited(
            (("service", "environment"), {"ODD": value}), (("model", "served_name"), "x" + served)
        ),
    )
    try:
        r = profiles.load(Project(root), "p")
    except BadInput:
        return  # refused as bad input (one line, nothing written): fine
    files, m = output.render_profile(r)
    dep = yaml.safe_load(files["p/k8s/deployment.yaml"])
    assert dep == m.workload
    c = dep["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in c["env"]}
    # what the profile says (YAML itself may have folded a U+0085 in the profile file): exactly that
    said = r.profile.service.environment["ODD"]
    assert expansion.expand(env["ODD"], {"HOME": "/h", "a": "A"}) == said
    assert r.profile.model.served_name in [expansion.expand(w, {}) for w in c["args"]]
    validate(dep)
