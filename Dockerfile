# syntax=docker/dockerfile:1
# Build stage: resolve and build wheels for the service and its dependencies.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# Runtime stage: non-root, BPE data baked in (it ships inside the app package), no compilers.
FROM python:3.11-slim AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    CTX_HOST=0.0.0.0 CTX_PORT=8000
RUN useradd --system --create-home --uid 10001 contextd
WORKDIR /srv/contextd
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
COPY --chown=contextd:contextd migrations ./migrations
COPY --chown=contextd:contextd app ./app
USER contextd
EXPOSE 8000
# Warm the token encodings at build time so the first request does not pay for it.
RUN python -c "from app.tokens import get_encoding; get_encoding('o200k_base'); get_encoding('cl100k_base')"
HEALTHCHECK --interval=10s --timeout=3s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz')"
# One worker per container; scale with containers. Exemplars (the assembly_id on the latency
# and size histograms) live in one process's memory, and several workers' metrics are merged
# without them.
CMD ["contextd", "serve", "--host", "0.0.0.0", "--port", "8000", "--workers", "1"]
