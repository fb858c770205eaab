"""The per-test timeout and the test tiers, for test/lit.cfg.py and
test/unittests/lit.cfg.py (either suite may run alone).

Tiers (docs/testing.md "Tiers"): the default is what CI runs on every
change; `lit -Dkiln_full=1` (scripts/test.sh --full, the nightly tier) also
runs the tests marked `REQUIRES: full` (the slow light-zoo models).

No test may hang (issue 22): each test gets kiln_timeout seconds (default
3600, `lit -Dkiln_timeout=N`, 0 for none; lit's --timeout overrides both).
docs/testing.md ("Timeouts") lists the slowest tests it was chosen above.
lit needs psutil to stop a test's process tree (python3-psutil, installed
by scripts/install-deps.sh); without it lit runs with no limit and warns.
"""

DEFAULT_TIMEOUT = 3600


def apply(lit_config, config):
    if lit_config.params.get("kiln_full", "0") not in ("", "0"):
        config.available_features.add("full")
    timeout = int(lit_config.params.get("kiln_timeout", str(DEFAULT_TIMEOUT)))
    if timeout > 0 and not lit_config.maxIndividualTestTime:
        supported, why = lit_config.maxIndividualTestTimeIsSupported
        if supported:
            lit_config.maxIndividualTestTime = timeout
        else:
            lit_config.warning(f"no per-test timeout: {why} (scripts/"
                               "install-deps.sh installs python3-psutil)")
