"""Test-session environment: no model hub, and torch threads that yield the CPU when idle.

Set before anything imports torch: OMP_WAIT_POLICY only takes effect at torch's first import, and on a
2-core machine spinning OpenMP threads slow generation 5-10x when other processes (servers, fakes) run.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# The default embedded model ships in parts that daari joins into its models dir (~500 MB, SHA-256 checked):
# once per machine for the whole suite, not once per test server's data dir.
os.environ.setdefault("DAARI_MODELS_DIR", os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "daari-test-models"))
