"""The org cache: `daari org-cache serve` (the token service) and what a daari instance uses to reach it."""
