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
COPY pyproject.toml README.md requirements.lock ./
COPY prism_challenge ./prism_challenge
# prism_challenge/share links to these: the installed package carries them.
COPY data_manifests ./data_manifests
COPY examples ./examples
# Exact versions from the lock; torch is the same release built for TORCH_INDEX (CPU or CUDA).
RUN grep -v '^torch==' requirements.lock > /tmp/lock.txt \
 && pip install --extra-index-url ${TORCH_INDEX} "torch==2.13.*" -r /tmp/lock.txt \
 && pip install --no-deps ".[validator,postgres]" && rm /tmp/lock.txt
COPY neurons ./neurons
COPY scripts ./scripts
COPY config.example.yaml ./

# Sandboxed code runs as 65534 (nobody); the validator itself needs no root either.
USER 65534:65534
EXPOSE 8000
ENTRYPOINT ["prism"]
CMD ["validator", "--config", "/etc/prism/config.yaml"]
