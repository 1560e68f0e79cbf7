"""Every stack keeps what its start compiles (docs/caches.md): the cache variables point at one mount,
a named volume whose name is a key over the image, the model and the compile flags — not the profile's
name — so stacks that compile the same code share it and no other does."""

from __future__ import annotations

import json

import yaml

from composegen.profiles import caches
from tests.support.cli import run_inproc
from tests.support.helpers import MINIMAL, make_project

OTHER_NAME = MINIMAL.replace("served_name: tiny", "served_name: other").replace(
    "host: 39999", "host: 39998"
)


def _rendered(root, name: str = "tiny") -> dict:
    res = run_inproc("--root", str(root), "render", name)
    assert res.returncode == 0, res.stderr
    return yaml.safe_load((root / "out" / name / "compose.yaml").read_text())


def _volume(doc: dict) -> str | None:
    return (doc.get("volumes") or {}).get(caches.MOUNTED, {}).get("name")


def test_every_cache_variable_points_at_the_keyed_volume(tmp_path):
    doc = _rendered(make_project(tmp_path, {"tiny": MINIMAL}))
    svc = doc["services"]["vllm"]
    for variable, sub in caches.VARIABLES.items():
        if (
            variable != "XDG_CACHE_HOME"
        ):  # only beside a Hugging Face mount HF_HOME can be pinned to
            assert svc["environment"][variable] == f"{caches.CACHE_TARGET}/{sub}"
    assert f"{caches.MOUNTED}:{caches.CACHE_TARGET}" in svc["volumes"]
    assert (
        _volume(doc).startswith(caches.VOLUME_PREFIX)
        and len(_volume(doc)) == len(caches.VOLUME_PREFIX) + 16
    )


def test_stacks_that_differ_only_in_names_share_the_volume_and_compile_flags_do_not(tmp_path):
    root = make_project(
        tmp_path,
        {
            "tiny": MINIMAL,
            "renamed": OTHER_NAME,
            "batch": MINIMAL.replace(
                "max-num-batched-tokens: 2048", "max-num-batched-tokens: 4096"
            ),
            "image": MINIMAL.replace("a" * 64, "c" * 64),
            "longer": MINIMAL.replace("max-model-len: 4096", "max-model-len: 8192"),
        },
    )
    names = ("tiny", "renamed", "batch", "image", "longer")
    volume = {name: _volume(_rendered(root, name)) for name in names}
    assert volume["tiny"] == volume["renamed"]  # the key is never the profile's name
    assert volume["tiny"] == volume["longer"]  # max-model-len compiles nothing
    # vLLM's compile range ends at max-num-batched-tokens; another image compiled other code
    assert len({volume["tiny"], volume["batch"], volume["image"]}) == 3
    res = run_inproc("--root", str(root), "diff", "tiny", "batch", "--json")
    changes = {c["path"]: c["class"] for c in json.loads(res.stdout)}
    assert changes[f"volumes.{caches.MOUNTED}.name"] == "functional"


def test_caches_off_renders_none_of_it_and_a_directory_is_mounted_from_the_project(tmp_path):
    root = make_project(
        tmp_path,
        {
            "off": MINIMAL + "caches: off\n",
            "dir": MINIMAL.replace("host: 39999", "host: 39997") + "caches: ./kept/dir\n",
        },
    )
    off = _rendered(root, "off")
    assert _volume(off) is None and not set(caches.VARIABLES) & set(
        off["services"]["vllm"].get("environment") or {}
    )
    assert not any(caches.CACHE_TARGET in v for v in off["services"]["vllm"].get("volumes", []))
    mounted = _rendered(root, "dir")
    assert f"../../kept/dir:{caches.CACHE_TARGET}" in mounted["services"]["vllm"]["volumes"]
    assert _volume(mounted) is None


def test_a_cache_path_outside_the_project_is_refused_and_nothing_is_written(tmp_path):
    for bad in ("../elsewhere", "/var/cache", "~/c", "a/../../b", "${HOME}/c"):
        root = make_project(
            tmp_path / str(abs(hash(bad))), {"tiny": MINIMAL + f"caches: '{bad}'\n"}
        )
        res = run_inproc("--root", str(root), "render")
        assert res.returncode == 2, (bad, res.stdout, res.stderr)
        assert "caches" in res.stderr and "Traceback" not in res.stderr
        assert not (root / "out").exists()


def test_render_check_holds_the_key(tmp_path):
    root = make_project(tmp_path, {"tiny": MINIMAL})
    _rendered(root)
    compose = root / "out/tiny/compose.yaml"
    text = compose.read_text()
    key = _volume(yaml.safe_load(text))
    compose.write_text(text.replace(key, caches.VOLUME_PREFIX + "0" * 16))
    res = run_inproc("--root", str(root), "render", "--check")
    assert res.returncode == 1 and key in res.stdout


def test_show_names_the_caches(tmp_path):
    root = make_project(tmp_path, {"tiny": MINIMAL})
    shown = json.loads(run_inproc("--root", str(root), "show", "tiny", "--json").stdout)["caches"]
    assert shown["volume"] == caches.VOLUME_PREFIX + shown["key"]
    assert shown["variables"]["VLLM_CACHE_ROOT"] == f"{caches.CACHE_TARGET}/vllm"
    text = run_inproc("--root", str(root), "show", "tiny").stdout
    assert f"caches   {shown['volume']} at {caches.CACHE_TARGET}" in text
