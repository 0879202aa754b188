# syntax=docker/dockerfile:1
# The production image: the service and its locked dependencies, no Java, no DynamoDB Local.
#   docker build -t loc-payments . && docker run -p 8000:8000 -e LOC_AUTH_JWT_SECRET=... \
#     -e LOC_CURSOR_SECRET=... loc-payments

FROM python:3.11-slim-bookworm AS builder

ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN pip install --no-cache-dir uv==0.13.8

WORKDIR /src
# Dependencies first, so a source change does not reinstall them.
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --no-editable --no-install-project

COPY domain/ domain/
COPY datasource/ datasource/
COPY resolvers/ resolvers/
COPY engine/ engine/
COPY schema/ schema/
COPY process/ process/
COPY server/ server/
COPY jobs/ jobs/
COPY infra/ infra/
COPY cli/ cli/
RUN uv sync --frozen --no-dev --no-editable


FROM python:3.11-slim-bookworm

RUN groupadd --system --gid 10001 app \
    && useradd --system --uid 10001 --gid app --no-create-home --shell /usr/sbin/nologin app

# --no-editable installed the project itself into the environment: no source tree is needed.
COPY --from=builder /app/.venv /app/.venv

# Trusted-document manifests: every *.json in /app/trusted-documents, mounted there (an ECS
# volume, a Kubernetes ConfigMap) or copied in by an image built FROM this one; the start logs how
# many documents it loaded. Empty, customers may send no query text in prod (only services may).
RUN mkdir -p /app/trusted-documents

# Every interface (prod's default too), so that a load balancer reaches the port; the metrics
# are on their own port, 9464 (LOC_METRICS=port, prod's default), not on the public one.
ENV PATH="/app/.venv/bin:$PATH" \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LOC_ENV=prod \
    LOC_HOST=0.0.0.0 \
    LOC_PORT=8000 \
    LOC_TRUSTED_DOCUMENTS=/app/trusted-documents

WORKDIR /app
# Numeric, so Kubernetes can verify runAsNonRoot without reading /etc/passwd.
USER 10001:10001
EXPOSE 8000 9464
CMD ["loc-payments", "serve"]
