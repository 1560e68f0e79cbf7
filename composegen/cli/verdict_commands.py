"""`plan`: a profile's KV pool, predicted from an earlier run (`qualify`: qualify_command.py)."""

from __future__ import annotations

from pathlib import Path

from composegen.cli.app import JsonOpt, ProfileArg, app, complete_run
from composegen.cli.app import load_profile as _load
from composegen.cli.optiongroups import option
from composegen.errors import BadInput as BadInputError
from composegen.evidence import plan as planning
from composegen.output import Output


@app.command()
def plan(
    name: str = ProfileArg,
    from_run: str | None = option(
        None,
        "--from",
        "A run to calibrate from (runs/<run>, a path, or a profile name).",
        autocompletion=complete_run,
    ),
    from_log: Path | None = option(None, "--from-log", "A vLLM startup log to calibrate from."),
    gpu_gib: float | None = option(
        None, "--gpu-gib", "GPU memory per device, when the log does not say."
    ),
    json_: bool = JsonOpt,
) -> None:
    """Predict the KV pool of a profile from earlier evidence (a prediction, never a measurement).

    Example: composegen plan 393k-gpu --from 4096-131k  # in composegen's clone
    """

    if (from_run is None) == (from_log is None):
        raise BadInputError("give exactly one of --from RUN or --from-log FILE")
    planning.check_gpu_gib(gpu_gib)  # before any file is read
    project, r = _load(name)
    report, cal = planning.calibration_from(project, run=from_run, log_path=from_log)
    result = planning.plan(r, report, gpu_gib=gpu_gib, calibration_profile=cal)
    Output(json_).report(result, lambda: planning.format_text(result))
