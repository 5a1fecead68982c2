"""Route the larger eval set offline with the classifier of an older commit (the before of docs/routing.md).

    python evals/routing/compare_old_classifier.py b076afb [tune|holdout|all]

Loads `daari/routing/classifier.py` of that commit as a module of its own (it must only import modules
that still exist) and prints accuracy per split against the current set's expected tiers.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from daari.eval.requests import to_request  # noqa: E402
from daari.eval.routing_set import DEFAULT_SET, SHORTCUTS, load_set  # noqa: E402
from daari.routing.plan import plan_tiers  # noqa: E402


def main() -> None:
    commit, split = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "all")
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:daari/routing/classifier.py"],
                            check=True, capture_output=True, text=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("old_classifier", f.name)
    assert spec is not None and spec.loader is not None
    old = importlib.util.module_from_spec(spec)
    sys.modules["old_classifier"] = old  # dataclasses look their module up while the class is built
    spec.loader.exec_module(old)
    right = total = 0
    for prompt in load_set(DEFAULT_SET):
        if split != "all" and prompt["split"] != split:
            continue
        if any(t in SHORTCUTS for t in prompt["expected_tier"].split("/")):
            continue
        tier = plan_tiers(old.classify(to_request(prompt)).ceiling, ["L3", "L4", "L6"], None, True)[0]
        total += 1
        right += tier in prompt["expected_tier"].split("/")
    print(f"classifier of {commit}, split {split}: {right}/{total} ({right / total:.0%}) at the expected tier")


if __name__ == "__main__":
    main()
