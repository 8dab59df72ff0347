"""The use cases: one function per operation (assemble, replay, compact, normalize, append,
recall, usage), from a typed request to a typed answer. Each loads through `app.storage`, calls
the core in `app.domain`, stores, and returns; the HTTP handlers in `app.api` only map a request
to one of them and its answer back, and bench, the CLI and tests call them without HTTP.
"""
