# A suite of three tests for lit-limits.test: test/lit_limits.py's timeout
# and tiers, applied as test/lit.cfg.py applies them.
import os
import sys

import lit.formats

config.name = "lit-limits"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".test"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
config.test_exec_root = lit_config.params["exec_root"]
sys.path.insert(0, lit_config.params["kiln_test_dir"])
import lit_limits  # noqa: E402
lit_limits.apply(lit_config, config)
