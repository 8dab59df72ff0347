"""The HTTP contract: the wire models of every route, one module per router and `common` for
what several share. Requests end in `Request`, responses in `Response`; field names are the
contract, and class names are the component names in `openapi.yaml`. It sits below the HTTP
handlers (`app.api`) and the use cases, which take these requests and return these responses,
and imports neither, nor storage: only the core, hooks and tokens."""
