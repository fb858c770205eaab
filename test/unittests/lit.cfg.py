# -*- Python -*-
# Runs the GoogleTest binaries in this directory, one lit test per TEST().
import os
import sys

import lit.formats

# The tiers and the per-test timeout of test/lit.cfg.py (test/lit_limits.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import lit_limits
lit_limits.apply(lit_config, config)

config.name = "KILN-UNIT"
config.test_format = lit.formats.GoogleTest(".", "Tests")
config.test_source_root = config.unittests_dir
config.test_exec_root = config.unittests_dir
