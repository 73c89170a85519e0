FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm libseccomp2 && rm -rf /var/lib/apt/lists/*
WORKDIR /srv/proctor
COPY . .
# One image for web and worker: the worker's generation and validation jobs need torch (the
# `models` extra); the web side never imports it.
RUN pip install --no-cache-dir -e '.[models]' && bash scripts/vendor.sh
EXPOSE 8000
# `proctor serve`, not uvicorn itself: it runs uvicorn with its proxy handling off (the app
# reads X-Forwarded-For from TRUSTED_PROXIES only, app/cli.py).
CMD ["proctor", "serve", "--host", "0.0.0.0"]
