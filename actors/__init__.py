"""daari's actors: the generic runtime (`actors.runtime`) and one module per actor (cache, executor, ...).

`actors.table` is the one table of the actors the server starts.
"""
