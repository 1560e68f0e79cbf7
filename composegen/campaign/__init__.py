"""Campaigns: a bracketed A/B (control, candidate, control again) or a qualification arm with its
fallback, run one stack at a time, resumable after Ctrl-C, a crash or a reboot, ending in a decision
record.

  state.py      runs/campaigns/N/state.json: the campaign's options and each arm's progress
  exclusive.py  refuse while another stack or container holds the profile's GPUs
  arm.py        one arm's lifecycle for both kinds: up (or attach, or wake) -> evidence -> down/sleep
  progress.py   what a run tells a person, arm by arm (the CLI draws it); the Outcome it ends with
  runner.py     the A/B: control, candidate, bracket through arm.py, the bracket check, the records
  bracket.py    the replayed control against the first: engine-reported figures within a tolerance
  sanitize.py   what may leave the machine: no host, IP, user, home path, GPU UUID/serial, container ID
  comparison.py comparison.json: figures, differences, criteria, decision; raw artifacts by SHA-256
  record.py     campaign.md in the seed's shape (Outcome, configuration, Results, proves / does not, Decision)
  qualifyarm.py `campaign qualify PRIMARY --fallback F` through arm.py: the same criteria on the
                fallback when it fails
  decision.py   `campaign decide N`: decision.json and the record's Decision
  reportheading.py  `report CAMPAIGN`: the arms' roles, the decision and the Outcome
  reports.py    the JSON shapes: state.json, comparison.json, qualification.json (`schema --report`)
"""

# What other rooms may import (tests/test_architecture.py checks every entry).
__all__ = ["decision", "progress", "qualifyarm", "reportheading", "reports", "runner", "state"]
