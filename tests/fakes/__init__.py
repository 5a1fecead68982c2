"""Fakes of upstream providers: real HTTP servers on 127.0.0.1, never branches in product code."""
