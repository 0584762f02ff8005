# The env server image: serves the env that openenv.yaml (or OPENENV_ENV) names on port 8000.
#   docker build -t openenv-echo . && docker run --rm -p 127.0.0.1:8000:8000 openenv-echo
# AutoEnv.from_env("docker:openenv-echo") starts it the same way and waits for /health.
# Offline (CI): --build-arg BASE_IMAGE=openenv/python (scripts/build_python_image.sh), whose pip
# installs from a local wheelhouse; the build then needs no registry (--network none).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1

# Core only (no vLLM/torch extras): the env server needs pydantic, fastapi, uvicorn and websockets.
COPY pyproject.toml README.md openenv.yaml ./
COPY openenv ./openenv
COPY envs ./envs
COPY server ./server
COPY clients ./clients
RUN pip install .

ENV OPENENV_HOST=0.0.0.0 OPENENV_PORT=8000
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)"
CMD ["python", "server/app.py"]
