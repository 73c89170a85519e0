FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm libseccomp2 && rm -rf /var/lib/apt/lists/*
WORKDIR /srv/proctor
COPY . .
# One image for web and worker: the worker's generation and validation jobs need torch (the
# `models` extra); the web side never imports it.
RUN pip install --no-cache-dir -e '.[models]' && bash scripts/vendor.sh
EXPOSE 8000
CMD ["proctor", "serve", "--host", "0.0.0.0"]
