"""Cache trust (docs/caching.md, "Trust"): shadow comparison, Wilson intervals, learned similarity bars,
answer diversity. Pure functions and small classes; the ShadowActor (actors/shadow.py) and the report use them."""
