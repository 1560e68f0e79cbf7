"""evidence's option groups: its bench (closed sweep or open loop) and its import mode (--from-log)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer

from composegen.bench import schedule
from composegen.bench.spec import BenchSpec
from composegen.cli.app import parse_ints as _ints
from composegen.cli.optiongroups import flag, option, profile_option
from composegen.errors import BadInput as BadInputError

RATES_OPTION = "evidence: --bench-rates"  # named in a bad rate's error


@dataclass(frozen=True)
class BenchAsk:
    """evidence's bench options: a closed sweep (--bench) or an open loop (--bench-rates)."""

    levels: str | None = option(
        None, "--bench", "Also run a load benchmark at these concurrencies."
    )
    rates: str | None = option(
        None, "--bench-rates", "Instead: an open-loop bench at these request rates (req/s)."
    )
    requests: int = typer.Option(32, "--bench-requests", help="With --bench*: requests per level.")
    input_tokens: int = option(1000, "--bench-input-tokens", "With --bench*: prompt tokens.")
    output_tokens: int = option(128, "--bench-output-tokens", "With --bench*: output tokens.")
    via_edge: bool = flag(
        "--bench-via-edge",
        "With --bench: through the edge's TLS listener, alternated with the door.",
    )

    def spec(self) -> BenchSpec | None:
        """The asked bench, checked; None when none was asked."""
        if self.via_edge and not self.levels:
            raise BadInputError("--bench-via-edge needs --bench LEVELS")
        if self.levels and self.rates:
            msg = "--bench and --bench-rates: one bench per run (a closed or an open loop)"
            raise BadInputError(msg)
        if not (self.levels or self.rates):
            return None
        return BenchSpec(
            self.input_tokens,
            self.output_tokens,
            self.requests,
            levels=() if self.rates else tuple(_ints(self.levels or "", "--bench")),
            rates=tuple(schedule.parse_rates(self.rates, RATES_OPTION) if self.rates else ()),
            via_edge=self.via_edge,
        ).check()


@dataclass(frozen=True)
class LogAsk:
    """evidence's import mode: a run built from a startup log recorded elsewhere."""

    path: Path | None = option(
        None, "--from-log", "Build a run from a startup log recorded elsewhere."
    )
    profile: str | None = profile_option("With --from-log: the profile of that run.")
    force: bool = flag(
        "--force",
        "With --from-log: keep a log whose model or max_model_len contradicts the profile.",
    )
