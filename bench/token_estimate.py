"""How far daari's token estimate (about 4 characters a token, daari/protocol/tokens.py) is from a real BPE
tokenizer (the embedded SmolLM2's) on code and prose: the margin local/context_fit.py puts on the estimate.

    python -m bench.token_estimate      # loads the tokenizer from the embedded model's GGUF (about a minute)
"""

from __future__ import annotations

import glob
import statistics

from daari.models import smollm2_gguf
from daari.protocol.tokens import estimate_text_tokens


def main() -> None:
    import transformers

    path = smollm2_gguf()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    files = sorted(glob.glob("daari/**/*.py", recursive=True)) + sorted(glob.glob("docs/*.md"))
    ratios = []
    for name in files:
        with open(name) as handle:
            text = handle.read()
        ratios.append(len(tokenizer.encode(text)) / max(1, estimate_text_tokens(text)))
    ratios.sort()
    print(f"{len(ratios)} files: real/estimated tokens mean {statistics.mean(ratios):.3f}, "
          f"p90 {ratios[int(len(ratios) * 0.9)]:.3f}, max {ratios[-1]:.3f}")


if __name__ == "__main__":
    main()
