"""The HTTP front end: an ASGI app served by Hypercorn's Trio worker."""
