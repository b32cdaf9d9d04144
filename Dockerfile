# The PRISM validator image. CPU by default; for GPU hosts build with a CUDA base, e.g.
#   docker build --build-arg BASE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04 \
#                --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128 -t prism-challenge .
# The same image runs the validator and, with sandbox.backend: docker, every sandbox
# (pin it by digest in sandbox.docker_image).
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}

ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ENV DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1

RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap ca-certificates python3 python3-pip \
      python3-venv \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/prism
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
COPY pyproject.toml README.md ./
COPY prism_challenge ./prism_challenge
RUN pip install --extra-index-url ${TORCH_INDEX} "torch==2.13.*" \
 && pip install .
COPY neurons ./neurons
COPY scripts ./scripts
COPY data_manifests ./data_manifests
COPY examples ./examples
COPY config.example.yaml ./

# Sandboxed code runs as 65534 (nobody); the validator itself needs no root either.
USER 65534:65534
EXPOSE 8000
ENTRYPOINT ["prism"]
CMD ["validator", "--config", "/etc/prism/config.yaml"]
