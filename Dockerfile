# One image for every Python service of the stack (simulator, mqtt_bridge, spark_jobs.*,
# db_connector, the `provision` job) and for the Spark workers.
#
#   docker build -t machinedata-app:0.1.0 .      (docker compose builds it for you)
#   docker build --build-arg EXTRA_CA_CERTS="$(cat my-proxy-ca.crt)" ...   behind a TLS-inspecting proxy
#
# Layers from the least to the most often changed: system packages, the pinned Python
# dependencies (pyspark is large), then the source; an edit of the code rebuilds only the last.

# ---------------------------------------------------------------------------------------------
# Stage 1: Spark's Kafka connector and spark-avro (and their dependencies) for the pinned
# pyspark, resolved from Maven Central by the same pom the local stack uses. The tag moves with
# Maven 3.9's patch releases: the library drops a patch's own tag (3.9.9's went on 2025-06-22).
FROM maven:3.9-eclipse-temurin-17 AS spark-jars
ARG EXTRA_CA_CERTS=""
# Each certificate of EXTRA_CA_CERTS goes into the JVM's trust store (Maven's HTTPS).
RUN set -eu; if [ -n "$EXTRA_CA_CERTS" ]; then \
        mkdir -p /tmp/ca; printf '%s\n' "$EXTRA_CA_CERTS" \
          | awk '/BEGIN CERTIFICATE/{n++} n{print > ("/tmp/ca/" n ".crt")}'; \
        for crt in /tmp/ca/*.crt; do \
            keytool -importcert -cacerts -noprompt -storepass changeit -alias "extra-$(basename "$crt" .crt)" \
                -file "$crt" > /dev/null 2>&1 || true; \
        done; \
    fi
WORKDIR /build
COPY kafka/pom-spark.xml kafka/pom-spark.xml
RUN mvn --batch-mode --no-transfer-progress -f kafka/pom-spark.xml \
        dependency:copy-dependencies -DoutputDirectory=/build/jars \
    && ls /build/jars | grep -q '^spark-sql-kafka-0-10_2.13-.*\.jar$' \
    && ls /build/jars | grep -q '^spark-avro_2.13-.*\.jar$'

# ---------------------------------------------------------------------------------------------
# Stage 2: the pinned dependencies of pyproject.toml as a requirements file. Copied from here,
# the install layer below depends on the dependencies alone, not on the rest of pyproject.toml.
FROM python:3.11-slim-bookworm AS requirements
COPY pyproject.toml /pyproject.toml
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('/pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /requirements.txt

# ---------------------------------------------------------------------------------------------
# Stage 3: runtime. Python 3.11 + Java 17 (pyspark's JVM) + the repo installed with pip.
FROM python:3.11-slim-bookworm AS runtime
ARG EXTRA_CA_CERTS=""

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt

# openjdk's postinst expects man dirs that the slim image strips; procps gives Spark's scripts `ps`.
RUN set -eux; \
    if [ -n "$EXTRA_CA_CERTS" ]; then \
        printf '%s\n' "$EXTRA_CA_CERTS" > /usr/local/share/ca-certificates/extra-ca.crt; update-ca-certificates; \
    fi; \
    mkdir -p /usr/share/man/man1; \
    apt-get update; \
    apt-get install -y --no-install-recommends openjdk-17-jre-headless procps; \
    rm -rf /var/lib/apt/lists/*; \
    ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /opt/java; \
    /opt/java/bin/java -version
ENV JAVA_HOME=/opt/java

# uid/gid 185 is the `spark` user of the apache/spark images: volumes shared with Spark
# containers (checkpoints) stay writable on both sides.
ARG APP_UID=185
RUN groupadd --system --gid "${APP_UID}" app \
    && useradd --system --uid "${APP_UID}" --gid app --home-dir /app --no-create-home \
               --shell /usr/sbin/nologin app

# The pinned dependencies: this layer survives every code edit.
WORKDIR /app
COPY --from=requirements /requirements.txt /tmp/requirements.txt
RUN pip install -r /tmp/requirements.txt && rm /tmp/requirements.txt

# Connector jars for spark.jars (read by the Spark jobs from SPARK_EXTRA_JARS_DIR).
ENV SPARK_EXTRA_JARS_DIR=/opt/spark-jars
COPY --from=spark-jars /build/jars/ ${SPARK_EXTRA_JARS_DIR}/

# The source tree stays at /app (the repo root: run/ is the data directory, and Spark's Python
# workers import the jobs from it); it is also pip-installed (no dependencies: they are above),
# which puts the mds-* console scripts on the PATH. The Avro schemas and the topic declarations
# are package data (streamkit/wire), found by importlib.resources either way.
COPY . /app
RUN set -eux; \
    pip install --no-deps /app; \
    rm -rf /app/build /app/*.egg-info; \
    mkdir -p /app/run; \
    chown app:app /app/run
ENV PYTHONPATH=/app

USER app

# Every compose service sets its own command; this default just proves the image works.
CMD ["python", "-c", "import streamkit, pyspark; print('machinedata-app', pyspark.__version__)"]
