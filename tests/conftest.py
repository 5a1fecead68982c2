"""Test-session environment: no model hub, and torch threads that yield the CPU when idle.

Set before anything imports torch: OMP_WAIT_POLICY only takes effect at torch's first import, and on a
2-core machine spinning OpenMP threads slow generation 5-10x when other processes (servers, fakes) run.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
