"""``python -m baselines.micro_rlhf {generate,fit} ...``: the ``evalstop-gym curves`` commands."""

import sys

from baselines.micro_rlhf.generate import main

sys.exit(main())
