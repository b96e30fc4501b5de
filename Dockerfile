# One image for every Python service of the stack (simulator, mqtt_bridge, spark_jobs.*,
# db_connector, the `topics` provisioning job) and for the Spark worker.
#
#   docker build -t machinedata-app:0.1.0 .      (docker compose builds it for you)

# ---------------------------------------------------------------------------------------------
# Stage 1: Spark's Kafka connector and spark-avro (and their dependencies) for the pinned
# pyspark, resolved from Maven Central by the same pom the local stack uses.
FROM maven:3.9.9-eclipse-temurin-17 AS spark-jars

WORKDIR /build
COPY kafka/pom-spark.xml kafka/pom-spark.xml
RUN mvn --batch-mode --no-transfer-progress -f kafka/pom-spark.xml \
        dependency:copy-dependencies -DoutputDirectory=/build/jars \
    && ls /build/jars | grep -q '^spark-sql-kafka-0-10_2.13-.*\.jar$' \
    && ls /build/jars | grep -q '^spark-avro_2.13-.*\.jar$'

# ---------------------------------------------------------------------------------------------
# Stage 2: runtime. Python 3.11 + Java 17 (pyspark's JVM) + the repo installed with pip.
FROM python:3.11-slim-bookworm AS runtime

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# openjdk's postinst expects man dirs that the slim image strips; procps gives Spark's scripts `ps`.
RUN set -eux; \
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

# The source tree stays at /app (the repo root: streamkit finds kafka/topics.yaml and schemas/
# relative to it, and run/ is the data directory); it is also pip-installed so the pinned
# dependencies and console scripts (spark-class, spark-submit) are on the system.
WORKDIR /app
COPY . /app
RUN set -eux; \
    pip install /app; \
    rm -rf /app/build /app/*.egg-info; \
    mkdir -p /app/run; \
    chown app:app /app/run
ENV PYTHONPATH=/app

# Connector jars for spark.jars (read by the Spark jobs from SPARK_EXTRA_JARS_DIR).
ENV SPARK_EXTRA_JARS_DIR=/opt/spark-jars
COPY --from=spark-jars /build/jars/ ${SPARK_EXTRA_JARS_DIR}/

USER app

# Every compose service sets its own command; this default just proves the image works.
CMD ["python", "-c", "import streamkit, pyspark; print('machinedata-app', pyspark.__version__)"]
