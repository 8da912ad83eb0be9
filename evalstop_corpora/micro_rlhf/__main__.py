"""``python -m evalstop_corpora.micro_rlhf {generate,fit} ...``: the ``evalstop-gym curves`` commands."""

import sys

from evalstop_corpora.micro_rlhf.generate import main

sys.exit(main())
