# -*- Python -*-
# Runs the GoogleTest binaries in this directory, one lit test per TEST().
import lit.formats

config.name = "KILN-UNIT"
config.test_format = lit.formats.GoogleTest(".", "Tests")
config.test_source_root = config.unittests_dir
config.test_exec_root = config.unittests_dir
