"""`python3 -m composegen.emulator serve MODEL --flag …` (the image's `vllm` launcher runs this)."""

import sys

from composegen.emulator.runner import main

sys.exit(main())
