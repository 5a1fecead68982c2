"""The schemathesis check `make fuzz` adds to its own (bench/fuzz_api.py loads this module as its hooks): every
error answer is in the client's protocol's shape, the rule the property tests use (tests/fuzz_support.py)."""

from __future__ import annotations

from typing import Any

import schemathesis

from tests.fuzz_support import shape_problem


@schemathesis.check
def error_in_the_clients_shape(ctx: Any, response: Any, case: Any) -> bool | None:
    problem = shape_problem(case.path, response.status_code, response.text)
    if problem is not None:
        raise AssertionError(problem)
    return None
