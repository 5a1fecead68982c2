"""Spend caps that downgrade instead of failing (docs/budget.md): the caps (caps.py), the spend counted so far
(ledger.py, kept in <data_dir>/spend.sqlite) and which project a request belongs to (project.py)."""
