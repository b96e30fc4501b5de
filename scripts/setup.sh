#!/usr/bin/env bash
# Installs everything the stack needs on Debian 12 (Python 3.11, Java 17, Maven, Go present).
# Every step is idempotent and skips what is already there, so CI and users can run it each time.
#   apt : mosquitto (2.0.13 or later: from bookworm-backports on Debian 12), prometheus,
#         prometheus-alertmanager (Debian packages)
#   pip : .venv/ with the pinned Python dependencies (pyproject.toml)
#   mvn : Kafka broker jars and Spark's Kafka/Avro connector jars into .stack/jars/;
#         Apicurio Registry (the optional schema registry) into .stack/apicurio/
#   go  : influxd 1.8.10 (pure Go, v2-compatible write API) into the user cache
set -euo pipefail
# --help answers at once (this header), without installing anything.
case " $* " in *" --help "* | *" -h "*)
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
esac
cd "$(dirname "$0")/.."
ROOT=$PWD
STACK_DIR=$ROOT/.stack
CACHE_DIR=${STACK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/machinedata-stack}
INFLUXD_VERSION=v1.8.10
# 3.0.x is the last line that runs on Java 17 (3.3 needs 21)
APICURIO_VERSION=3.0.9
mkdir -p "$STACK_DIR" "$CACHE_DIR/bin"

say() { printf '[setup] %s\n' "$*"; }
need_sudo() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
hash_of() { cat "$@" | sha256sum | cut -c1-16; }

# --- apt -------------------------------------------------------------------------------------
if command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ]; then have_mosq=1; else have_mosq=0; fi
if [ $have_mosq = 1 ] && command -v mosquitto_passwd >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 \
   && { command -v prometheus-alertmanager >/dev/null 2>&1 || [ -x /usr/bin/prometheus-alertmanager ]; }; then
  say "apt: mosquitto, prometheus and alertmanager present"
else
  say "apt: installing mosquitto, mosquitto-clients, prometheus, prometheus-alertmanager"
  need_sudo apt-get update -qq
  # Debian may start the packaged daemons; the stack launcher runs its own instances on
  # 127.0.0.1, so stop the system ones that we just caused to start.
  DEBIAN_FRONTEND=noninteractive need_sudo apt-get install -y -qq --no-install-recommends \
    mosquitto mosquitto-clients prometheus prometheus-alertmanager >/dev/null
  for svc in mosquitto prometheus prometheus-alertmanager; do
    need_sudo service "$svc" stop >/dev/null 2>&1 || true
  done
fi
# Mosquitto before 2.0.13 ignores max_inflight_messages towards a client that returns to a
# backlog: it pushes the whole backlog in flight, so a lost connection redelivers all of it.
# Debian 12 ships 2.0.11; its backports carry a fixed release.
MOSQUITTO_MIN=2.0.13
mosquitto_version() { { /usr/sbin/mosquitto -h 2>/dev/null || true; } | sed -n '1s/^mosquitto version //p'; }
version_below() { [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$1" ]; }
have=$(mosquitto_version)
if version_below "${have:-0}" "$MOSQUITTO_MIN"; then
  codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
  if [ "$codename" = bookworm ]; then
    say "apt: mosquitto ${have:-?} is older than $MOSQUITTO_MIN: installing it from bookworm-backports"
    backports=/etc/apt/sources.list.d/bookworm-backports.list
    if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
      echo "deb http://deb.debian.org/debian bookworm-backports main" | need_sudo tee "$backports" >/dev/null
    fi
    need_sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive need_sudo apt-get install -y -qq --no-install-recommends \
      -t bookworm-backports mosquitto mosquitto-clients >/dev/null
    need_sudo service mosquitto stop >/dev/null 2>&1 || true
  else
    say "apt: mosquitto ${have:-?} is older than $MOSQUITTO_MIN; install a newer one (the launcher refuses it)"
  fi
else
  say "apt: mosquitto $have"
fi

# --- Python ----------------------------------------------------------------------------------
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
want=$(hash_of pyproject.toml)
if [ -x .venv/bin/python ] && [ "$(cat .venv/.installed 2>/dev/null)" = "$want" ]; then
  say "pip: .venv up to date"
else
  say "pip: installing pinned dependencies into .venv (first time: a few minutes, pyspark is large)"
  # a venv whose creation was interrupted has python but no pip: make it anew
  if ! .venv/bin/python -m pip --version >/dev/null 2>&1; then rm -rf .venv && "$PY" -m venv .venv; fi
  .venv/bin/python -m pip install -q --upgrade pip
  # compat mode: a path entry to the repo root, so packages added later are importable too
  .venv/bin/python -m pip install -q -e '.[dev]' --config-settings editable_mode=compat
  echo "$want" > .venv/.installed
fi

# --- Maven -----------------------------------------------------------------------------------
copy_jars() {  # pom, target dir
  local pom=$1 dest=$2 stamp=$2/.installed want
  want=$(hash_of "$pom")
  if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then say "mvn: $(basename "$dest") jars up to date"; return; fi
  say "mvn: resolving $pom"
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
  mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$dest.tmp"
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  echo "$want" > "$stamp"
}
# Spark's connector jars must be built for exactly the pyspark in .venv: catch a half-done upgrade.
pyspark_version=$(.venv/bin/python -c 'import pyspark; print(pyspark.__version__)')
pom_version=$(sed -n 's#.*<spark.version>\(.*\)</spark.version>.*#\1#p' kafka/pom-spark.xml)
if [ "$pyspark_version" != "$pom_version" ]; then
  echo "[setup] pyspark is $pyspark_version but kafka/pom-spark.xml asks for $pom_version: make them equal" >&2
  exit 1
fi
copy_jars kafka/pom-broker.xml "$STACK_DIR/jars/kafka"
copy_jars kafka/pom-spark.xml "$STACK_DIR/jars/spark-all"
# Only the connector jars that the pyspark wheel does not already ship: two versions of one
# library on the classpath (scala, hadoop, lz4, ...) break Spark in confusing ways.
pyspark_jars=$(.venv/bin/python -c 'import pyspark, os; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
rm -rf "$STACK_DIR/jars/spark" && mkdir -p "$STACK_DIR/jars/spark"
for jar in "$STACK_DIR"/jars/spark-all/*.jar; do
  artifact=$(basename "$jar" | sed -E 's/-[0-9][0-9A-Za-z.+-]*\.jar$//')
  if ! ls "$pyspark_jars/$artifact"-[0-9]*.jar >/dev/null 2>&1; then cp "$jar" "$STACK_DIR/jars/spark/"; fi
done
say "mvn: spark connector jars: $(ls "$STACK_DIR/jars/spark" | tr '\n' ' ')"
# Apicurio Registry ships as one zip (runner jar + lib/): fetched through Maven's cache, unpacked
# once per version. Only a `SCHEMA_REGISTRY=true` stack starts it.
APICURIO_DIR=$STACK_DIR/apicurio
if [ "$(cat "$APICURIO_DIR/.installed" 2>/dev/null)" = "$APICURIO_VERSION" ]; then
  say "mvn: apicurio registry $APICURIO_VERSION present"
else
  say "mvn: fetching apicurio registry $APICURIO_VERSION"
  rm -rf "$APICURIO_DIR.tmp" && mkdir -p "$APICURIO_DIR.tmp"
  mvn -q -B -Dstyle.color=never dependency:copy \
    "-Dartifact=io.apicurio:apicurio-registry-app:$APICURIO_VERSION:zip:all" \
    -DoutputDirectory="$APICURIO_DIR.tmp"
  (cd "$APICURIO_DIR.tmp" && "$ROOT/.venv/bin/python" -m zipfile -e ./*.zip . && rm -f ./*.zip)
  rm -rf "$APICURIO_DIR" && mv "$APICURIO_DIR.tmp" "$APICURIO_DIR"
  echo "$APICURIO_VERSION" > "$APICURIO_DIR/.installed"
fi

# --- Go: influxd 1.8.10 ----------------------------------------------------------------------
INFLUXD=$CACHE_DIR/bin/influxd
if [ -x "$INFLUXD" ]; then
  say "go: influxd present ($INFLUXD)"
else
  say "go: building influxd $INFLUXD_VERSION (pure Go; a few minutes on 2 cores)"
  # Go >= 1.23 refuses some //go:linkname uses of 2021-era dependencies at link time.
  (cd "$CACHE_DIR" && GOBIN="$CACHE_DIR/bin" GOFLAGS= go install -ldflags=-checklinkname=0 \
    "github.com/influxdata/influxdb/cmd/influxd@$INFLUXD_VERSION")
fi
ln -sfn "$INFLUXD" "$STACK_DIR/influxd"
say "done"
