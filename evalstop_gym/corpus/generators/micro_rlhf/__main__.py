"""``python -m evalstop_gym.corpus.generators.micro_rlhf {generate,fit} ...``: the ``evalstop-gym curves`` commands."""

import sys

from evalstop_gym.corpus.generators.micro_rlhf.generate import main

sys.exit(main())
