# A raftflow worker: Python 3.11 and raftflow in a virtualenv, run as an unprivileged user.
# Build from the repository root (the context is the repository; .dockerignore keeps it to
# the package's sources):
#
#   docker build -f deploy/worker.Dockerfile -t raftflow/worker:0.1.0 .
#
# Your app: build FROM this image and COPY your module into /app (the working directory is
# on the import path), then run `raftflow worker yourmodule:engine`. The backend URL comes
# from $RAFTFLOW_URL (a Secret or an env file: it may hold credentials). SIGTERM drains
# (running steps finish, up to 30 s, and hand their executions back): give the container a
# stop grace period above that (compose stop_grace_period, Kubernetes
# terminationGracePeriodSeconds). PYTHON_IMAGE picks another base with python3 and its venv
# module (e.g. a mirror of python:3.11-slim).
ARG PYTHON_IMAGE=python:3.11-slim
FROM ${PYTHON_IMAGE}

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/raftflow/bin:$PATH

COPY . /tmp/raftflow-src
RUN python3 -m venv /opt/raftflow \
    && /opt/raftflow/bin/pip install --quiet /tmp/raftflow-src \
    && rm -rf /tmp/raftflow-src \
    && useradd --system --uid 10001 --home-dir /app --create-home raftflow

USER 10001
WORKDIR /app
# 9464: where a metrics exporter registered through the worker hooks would listen
# (raftflow itself serves none yet).
EXPOSE 9464
STOPSIGNAL SIGTERM
CMD ["raftflow", "worker", "raftflow.engine.ops.demo:engine", "--concurrency", "8"]
