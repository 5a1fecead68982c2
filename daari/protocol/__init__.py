"""Wire protocols (OpenAI, Anthropic) and the protocol-neutral shapes they translate to and from."""
