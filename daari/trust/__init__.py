"""Whether daari can vouch for an answer: what the prompt stated about it and checks of the answer against that;
cache trust (docs/caching.md, "Trust"): shadow comparison, Wilson intervals, learned similarity bars, answer
diversity. Pure functions and small classes; the judge step, the ShadowActor (actors/shadow.py) and the report
use them."""
