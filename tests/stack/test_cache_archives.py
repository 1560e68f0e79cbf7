"""`composegen cache import` refuses an archive that could write outside its volume or is not an
export (exit 2) before it asks the engine anything; `cache export` refuses a KEY that is not one;
the ready summary's warmth line (docs/caches.md). No engine: the refusals come first."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest

from composegen.cli.readysummary import warmth
from tests.support.cli import run_inproc
from tests.support.helpers import make_project

KEY = "0123456789abcdef"


def _archive(path, members: list[tarfile.TarInfo], manifest: bool = True, key: str = KEY) -> None:
    data = b"kernel"
    files = {m.name: hashlib.sha256(data).hexdigest() for m in members if m.isfile()}
    with tarfile.open(path, "w") as tar:
        for m in members:
            m.size = len(data) if m.isfile() else 0
            tar.addfile(m, io.BytesIO(data) if m.isfile() else None)
        if manifest:
            doc = json.dumps({"key": key, "files": files}).encode()
            info = tarfile.TarInfo("composegen-cache.json")
            info.size = len(doc)
            tar.addfile(info, io.BytesIO(doc))


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    m = tarfile.TarInfo(name)
    m.type, m.linkname = kind, link
    return m


@pytest.mark.parametrize(
    ("members", "said"),
    [
        ([_member("triton/x", tarfile.SYMTYPE, "/etc/passwd")], "not a file or directory"),
        ([_member("triton/x", tarfile.LNKTYPE, "vllm/y")], "not a file or directory"),
        ([_member("../escape")], "not plain path components"),
        ([_member("/etc/cron.d/x")], "not plain path components"),
        ([_member("vllm/../../x")], "not plain path components"),
        ([_member("dev", tarfile.CHRTYPE)], "not a file or directory"),
    ],
)
def test_import_refuses_links_special_files_and_names_that_climb(tmp_path, members, said):
    root = make_project(tmp_path / "p", {})
    _archive(tmp_path / "a.tar", members)
    res = run_inproc("--root", str(root), "cache", "import", str(tmp_path / "a.tar"))
    assert res.returncode == 2 and said in res.stderr and "nothing imported" in res.stderr


def test_import_refuses_what_is_not_an_export_and_a_file_missing_from_its_manifest(tmp_path):
    root = make_project(tmp_path / "p", {})
    _archive(tmp_path / "bare.tar", [_member("vllm/x")], manifest=False)
    res = run_inproc("--root", str(root), "cache", "import", str(tmp_path / "bare.tar"))
    assert res.returncode == 2 and "not a `composegen cache export`" in res.stderr
    _archive(tmp_path / "extra.tar", [_member("vllm/x")])
    with tarfile.open(tmp_path / "extra.tar", "a") as tar:
        tar.addfile(_member("vllm/planted"), io.BytesIO(b""))
    res = run_inproc("--root", str(root), "cache", "import", str(tmp_path / "extra.tar"))
    assert res.returncode == 2 and "'vllm/planted' is not in its manifest" in res.stderr
    (tmp_path / "link.tar").symlink_to(tmp_path / "extra.tar")
    res = run_inproc("--root", str(root), "cache", "import", str(tmp_path / "link.tar"))
    assert res.returncode == 2 and "never follows a link" in res.stderr
    (tmp_path / "text.tar").write_text("not a tar\n" * 100)
    res = run_inproc("--root", str(root), "cache", "import", str(tmp_path / "text.tar"))
    assert res.returncode == 2 and "not a readable tar" in res.stderr


@pytest.mark.parametrize("key", [f"{KEY}-emulated", "../x", f"{KEY}-real", f"../{KEY}"])
def test_import_refuses_a_manifest_whose_key_is_not_one(tmp_path, key):
    root = make_project(tmp_path / "p", {})
    _archive(tmp_path / "a.tar", [_member("vllm/x")], key=key)  # the record file is named by it
    res = run_inproc("--root", str(root), "cache", "import", str(tmp_path / "a.tar"))
    assert res.returncode == 2 and "not a cache key" in res.stderr
    assert not (root / ".composegen" / "caches").exists()


@pytest.mark.parametrize(
    "key", ["../x", "a/b", "0123456789ABCDEF", "abc", f"{KEY}-real", f"{KEY}-emulated/x"]
)
def test_export_refuses_a_key_that_is_not_one(tmp_path, key):
    root = make_project(tmp_path / "p", {})
    res = run_inproc("--root", str(root), "cache", "export", key, str(tmp_path / "out.tar"))
    assert res.returncode == 2 and "KEY" in res.stderr and not (tmp_path / "out.tar").exists()


def test_the_summary_says_warmth_in_one_line_with_the_cold_figure_when_known():
    warm = {"cache": "warm", "compile_seconds": 1.11, "cache_cold_compile_seconds": 9.94}
    assert warmth(warm, False) == "warm start: torch.compile from cache 1.11 s, cold was 9.94 s"
    unknown = warm | {"cache_cold_compile_seconds": None}
    assert warmth(unknown, True).endswith("cold figure unknown (EMULATED)")
    assert warmth({"cache": "cold", "compile_seconds": 9.94}, False) == (
        "cold start: torch.compile 9.94 s"
    )
