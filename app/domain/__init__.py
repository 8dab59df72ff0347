"""The functional core: pure functions over plain data.

No I/O, no clock, no randomness, no framework imports (an architecture test enforces it).
"""
