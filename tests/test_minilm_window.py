"""`MiniLM.seen_chars` reads a prefix of each text: its answer must be the whole text's, whatever the text."""

from daari.semantic.minilm import MAX_TOKENS, SEEN_PREFIX_CHARS, load_minilm


def whole_text_cut(tokenizer: object, text: str) -> int:
    """The answer from tokenizing all of the text (what seen_chars did before)."""
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]  # type: ignore[operator]
    window = MAX_TOKENS - 2
    return len(text) if len(offsets) <= window else int(offsets[window - 1][1])


def test_the_prefix_gives_the_whole_texts_cut() -> None:
    model = load_minilm()
    code = "    def parse(self, body):\n        return json.loads(body)  # tokenizer_config_v2\n" * 400
    exactly = " ".join(["word"] * (MAX_TOKENS - 2))  # 254 pieces: all of it is seen, trailing spaces or not
    texts = [
        "", "user: hi", "user: " + "merge two dictionaries; " * 5000, code,
        exactly, exactly + "   \n  ", exactly + " more",
        "x" * 9000 + " tail",  # no break before the first prefix's end: the whole text is read
        "antidisestablishmentarianism " * 2000,  # many pieces per word, cut inside a word
        " " * (SEEN_PREFIX_CHARS - 2) + "user: " + "a b " * 400,  # the first prefix holds no pieces: grown
        "日本語のテキスト" * 600 + " end", "Ünïcödé àccents " * 700, "tab\tseparated\tvalues\r\n" * 600,
    ]
    # A word the first prefix's end would cut: past 100 characters the whole word is one [UNK] piece, its first
    # 56 characters are many pieces; so a prefix cut inside it would move the window's end. At several offsets.
    for shift in range(0, 120, 8):
        filler = ("a" + " " * 15) * 250
        texts.append(filler + " " * (SEEN_PREFIX_CHARS - 56 - len(filler) + shift) + "abcdefghij" * 15 + " tail" * 9)
    assert model.seen_chars(texts) == [whole_text_cut(model.tokenizer, t) for t in texts]
    assert model.seen_chars([texts[2]])[0] < len(texts[2])  # a cut, not the whole text
