FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm && rm -rf /var/lib/apt/lists/*
WORKDIR /srv/proctor
COPY . .
RUN pip install --no-cache-dir -e . && bash scripts/vendor.sh
EXPOSE 8000
CMD ["proctor", "serve", "--host", "0.0.0.0"]
