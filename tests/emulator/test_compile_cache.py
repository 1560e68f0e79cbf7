"""The emulated engine keeps a torch.compile cache as vLLM does (composegen/emulator/loading.py): the first
start compiles and saves under VLLM_CACHE_ROOT, a start that finds the artifacts loads them with the
phrases of a real warm start (tests/data/real-0.26.0-h100-warmstart/kept.log) and a shorter compile, a
changed compile configuration misses. Read back through the real startup parser."""

from __future__ import annotations

import io
from pathlib import Path

from composegen.emulator import loading
from composegen.emulator.memory import MemoryInputs, plan_memory
from composegen.emulator.runner import Log
from composegen.vllm.startup import parse_startup_log

KEPT = Path(__file__).resolve().parents[1] / "data" / "real-0.26.0-h100-warmstart" / "kept.log"


def _start(monkeypatch, root: Path, **values) -> str:
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(root))
    monkeypatch.setenv("EMU_WEIGHT_SHARDS", "1")
    buf = io.StringIO()
    values = {"model": "m", "max_num_batched_tokens": 2048, **values}
    assert loading.load(Log(buf), values, plan_memory(values, MemoryInputs()), None, 1.0)
    return buf.getvalue()


def test_second_start_is_warm_with_the_real_phrases_and_a_shorter_compile(monkeypatch, tmp_path):
    cold = parse_startup_log(_start(monkeypatch, tmp_path))
    warm_log = _start(monkeypatch, tmp_path)
    warm = parse_startup_log(warm_log)
    real = parse_startup_log(KEPT.read_text())
    assert (cold.cache, warm.cache) == ("cold", "warm")
    assert warm.cache_reused == real.cache_reused  # the recording's phrases, read the same way
    assert cold.cache_compiled == real.cache_reused
    assert warm.cache_directory == cold.cache_directory
    assert warm.cache_directory.startswith(f"{tmp_path}/torch_compile_cache/")
    assert warm.compile_seconds < cold.compile_seconds
    assert warm.engine_init_seconds < cold.engine_init_seconds


def test_another_compile_configuration_misses_and_an_empty_root_is_cold(monkeypatch, tmp_path):
    _start(monkeypatch, tmp_path)
    other = parse_startup_log(_start(monkeypatch, tmp_path, max_num_batched_tokens=4096))
    assert other.cache == "cold"
    assert other.cache_compiled[0] == "graph for compile range (1, 4096)"
    assert parse_startup_log(_start(monkeypatch, tmp_path / "elsewhere")).cache == "cold"


def test_an_unwritable_cache_stays_cold_and_a_planted_link_is_not_an_artifact(
    monkeypatch, tmp_path
):
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # a cache root below a file cannot be created (even by root)
    first = parse_startup_log(_start(monkeypatch, blocked / "vllm"))
    assert first.cache == "cold" and "AOT compilation" not in first.cache_compiled
    root = tmp_path / "linked"
    cache = loading.CompileCache(
        {"model": "m", "max_num_batched_tokens": 2048}, {"VLLM_CACHE_ROOT": str(root)}
    )
    Path(cache.directory).mkdir(parents=True)
    Path(cache.aot).parent.mkdir(parents=True)
    (Path(cache.directory) / "vllm_compile_cache.py").symlink_to("/etc/hostname")
    Path(cache.aot).symlink_to("/etc/hostname")
    assert not cache.warm
