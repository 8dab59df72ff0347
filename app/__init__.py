"""contextd: the context service that decides what an LLM agent sees on each model call."""
