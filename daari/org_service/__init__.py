"""`daari org-cache serve`, the org cache's token service: a process of its own, above daari's server (it reuses
its guard), and reached by instances only through the HTTP paths in daari/org/api.py."""
