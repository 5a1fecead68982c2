"""daari's actors: the generic runtime (`actors.runtime`) and one module per actor (cache, executor, ...).

`actors.faults` is how runtime faults look to clients; the table of the actors the server starts is
`daari/server/actor_table.py`, part of the composition root.
"""
