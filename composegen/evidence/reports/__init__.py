"""The evidence room's report shapes, one small module per `composegen schema --report` name
(cli/reports.py): bench (and vllm-bench-serve, the bench deltas of compare), gate, ladder, qualify,
plan, compare, runs (the `report` command) and bundle (evidence.json). Producers in evidence/ return
these models; JSON is made only by the CLI and by the bundle writer."""
