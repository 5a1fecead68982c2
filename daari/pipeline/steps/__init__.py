"""The pipeline's steps, one module each, in the routing spec's order (daari/server/compose.py builds the list).

headers -> L0 -> parse -> agent turn -> classify -> CCS -> L1 -> L2 -> Lt -> refine -> execute (with judge),
then cache write -> render. docs/architecture.md has the picture.
"""
