"""How often daari's secret detector fires on ordinary code (docs/privacy.md, "False positives").

The corpus is this repository's own daari/ and tests/ Python files (less the files that hold fixture secrets on
purpose) plus a fixed sample of the venv's site-packages: code an agent reads into its context every day, where
every finding is a false positive unless it is a real key. Each file is one text, as a tool result would show it.
Findings are printed by kind with a masked excerpt, so a reader can check that none is a real secret.

    python -m evals.privacy.false_positives [--site-files 600] [--compare-detect-secrets]

`--compare-detect-secrets` also runs Yelp's detect-secrets (installed apart, e.g. `pip install --target
/tmp/ds detect-secrets` and PYTHONPATH=/tmp/ds) over the same files and over the fixture secrets, for
docs/architecture.md "Libraries and why".
"""

from __future__ import annotations

import argparse
import random
import site
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from daari.privacy.detect import find_secrets

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_FILES = {"privacy_fixtures.py", "test_privacy_rules.py", "test_privacy_server.py"}
SEED = 26


def corpus(site_files: int) -> list[Path]:
    own = sorted(p for d in ("daari", "tests") for p in (ROOT / d).rglob("*.py") if p.name not in FIXTURE_FILES)
    packages = sorted(p for d in site.getsitepackages() for p in Path(d).rglob("*.py") if p.stat().st_size < 500_000)
    sample = random.Random(SEED).sample(packages, min(site_files, len(packages)))
    return own + sorted(sample)


def mask(secret: str) -> str:
    return secret[:6] + "..." + f"({len(secret)} chars)"


def ours(files: list[Path]) -> None:
    texts = [p.read_text("utf-8", "replace") for p in files]
    lines = sum(t.count("\n") + 1 for t in texts)
    size = sum(len(t) for t in texts)
    start = time.perf_counter()
    results = [find_secrets(t) for t in texts]
    elapsed = time.perf_counter() - start
    kinds: Counter[str] = Counter()
    flagged = 0
    for path, text, found in zip(files, texts, results, strict=True):
        flagged += bool(found)
        for f in found:
            kinds[f.kind] += 1
            print(f"  {f.kind:15} {path.relative_to(path.anchor)}: {mask(text[f.start:f.end])}")
    total = sum(kinds.values())
    print(f"daari: {len(files)} files, {lines} lines, {size / 1e6:.1f} MB; {total} findings in {flagged} files "
          f"({flagged / len(files):.2%} of files, {total / lines * 1000:.3f} per 1,000 lines); by kind {dict(kinds)}; "
          f"{size / 1e6 / elapsed:.1f} MB/s")


def detect_secrets_run(files: list[Path]) -> None:
    from detect_secrets.core.scan import scan_file  # type: ignore[import-not-found]
    from detect_secrets.settings import default_settings  # type: ignore[import-not-found]

    from tests.privacy_fixtures import SECRETS, tool_output

    size = sum(p.stat().st_size for p in files)
    with default_settings():
        start = time.perf_counter()
        found = {str(p): list(scan_file(str(p))) for p in files}
        elapsed = time.perf_counter() - start
        kinds = Counter(s.type for secrets in found.values() for s in secrets)
        flagged = sum(bool(s) for s in found.values())
        total = sum(kinds.values())
        print(f"detect-secrets: {total} findings in {flagged} files ({flagged / len(files):.2%} of files); "
              f"by kind {dict(kinds)}; {size / 1e6 / elapsed:.2f} MB/s")
        with tempfile.TemporaryDirectory() as tmp:
            env = Path(tmp) / "tool_output.env"
            env.write_text(tool_output())
            values = {s.secret_value for s in scan_file(str(env))}
        caught = sorted(kind for kind, secret in SECRETS.items() if secret in values)
        print(f"detect-secrets on the fixture tool result: {len(caught)}/{len(SECRETS)} found whole: {caught}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site-files", type=int, default=600)
    parser.add_argument("--compare-detect-secrets", action="store_true")
    args = parser.parse_args()
    files = corpus(args.site_files)
    ours(files)
    if args.compare_detect_secrets:
        detect_secrets_run(files)


if __name__ == "__main__":
    sys.exit(main())
