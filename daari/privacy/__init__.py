"""Secrets that never leave the machine: find them in text (detect.py), swap them for stable placeholders on the
way to a remote tier (redact.py, never_send.py) and put them back in the answer (restore.py). docs/privacy.md."""
