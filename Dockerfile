# cnsched worker / sink image. Production talks to Apache Kafka through KAFKA_BOOTSTRAP;
# the embedded broker extra is not installed here.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY core ./core
COPY streams ./streams
COPY sinks ./sinks
RUN pip install --no-cache-dir . \
    && useradd --create-home cnsched \
    && mkdir -p /data && chown cnsched /data
USER cnsched
ENV CNSCHED_DATA_DIR=/data/worker \
    CNSCHED_WEB_HOST=0.0.0.0 \
    CNSCHED_DUCKDB_PATH=/data/cnsched.duckdb \
    NUMBA_CACHE_DIR=/tmp/numba-cache
EXPOSE 6066
ENTRYPOINT ["cnsched"]
CMD ["worker"]
