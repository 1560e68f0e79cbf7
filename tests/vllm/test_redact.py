"""vLLM prints its --api-key in clear (`'api_key': ['sk-test']`, recorded on a real 0.26.0): every log text
composegen reads goes through redact.mask."""

from __future__ import annotations

from pathlib import Path

from composegen.vllm import startup
from composegen.vllm.redact import mask

LOG = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "real-0.26.0-h200-apikey-routes"
    / "serve-apikey-two-names-eager.log"
)


def test_the_recorded_key_is_masked_and_nothing_else_changes():
    text = LOG.read_text(encoding="utf-8")
    assert "'api_key': ['sk-test']" in text
    masked = mask(text)
    assert "sk-test" not in masked and "'api_key': '***'" in masked
    changed = [
        (a, b) for a, b in zip(text.splitlines(), masked.splitlines(), strict=True) if a != b
    ]
    assert len(changed) == 1 and "non-default args" in changed[0][0]
    report = startup.parse_startup_log(masked).to_json()  # the parser still reads the masked line
    assert report["effective_args"]["served_model_name"] == ["tiny", "ds4-flash"]
    assert report["effective_args"]["api_key"] == "***"


def test_other_spellings_of_secrets_are_masked():
    assert (
        mask("vllm serve m --api-key sk-1 --port 8000") == "vllm serve m --api-key *** --port 8000"
    )
    assert mask("--api-key=sk-2") == "--api-key=***"
    assert (
        mask("Namespace(api_key=['a', 'b'], hf_token='hf_x')")
        == "Namespace(api_key='***', hf_token='***')"
    )
    assert mask('{"api_key": "k"}') == "{\"api_key\": '***'}"
    assert mask("'api_key': None, 'port': 1") == "'api_key': None, 'port': 1"
