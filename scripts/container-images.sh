#!/usr/bin/env bash
# Builds, on a machine that reaches package registries but no container registry, stand-ins of
# the official images that docker-compose.yml and the Dockerfile name (docker/standins/README.md),
# tagged with the official names. Idempotent: the Debian base is made once (debootstrap), the
# builds reuse podman's layer cache, and an image whose inputs did not change is not rebuilt.
#   scripts/container-images.sh            # every stand-in
#   EXTRA_CA_CERTS_DIR=/path scripts/...   # *.crt put into every image (default: the host's extra CAs)
set -euo pipefail
# --help answers at once (this header), without installing anything.
case " $* " in *" --help "* | *" -h "*)
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
esac
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE_DIR=${STACK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/machinedata-stack}
WORK=$ROOT/.stack/images
export CONTAINERS_CONF=${CONTAINERS_CONF:-$ROOT/docker/podman/containers.conf}
BASE=localhost/debian:bookworm
CA_BASE=localhost/debian-ca:bookworm
MIRROR=${DEBIAN_MIRROR:-$(sed -n 's#^URIs: *\(http[^ ]*/debian\)$#\1#p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
say() { printf '[images] %s\n' "$*"; }
mkdir -p "$WORK"
# One build at a time (two test workers may ask at once): the others wait, then find the images
# up to date. The build contexts under $WORK are rewritten by each run.
exec 9> "$WORK/.lock"
flock 9

ca_certs=""
for crt in "${EXTRA_CA_CERTS_DIR:-/usr/local/share/ca-certificates}"/*.crt; do
  [ -f "$crt" ] && ca_certs+="$(cat "$crt")"$'\n'
done

# --- the Debian 12 base --------------------------------------------------------------------------
if podman image exists "$BASE"; then
  say "base $BASE present"
else
  say "base: debootstrap bookworm from $MIRROR (about a minute)"
  rootfs=$CACHE_DIR/debian-bookworm-rootfs
  rm -rf "$rootfs.tmp"
  debootstrap --variant=minbase bookworm "$rootfs.tmp" "$MIRROR" > "$WORK/debootstrap.log" 2>&1 \
    || { tail -n 20 "$WORK/debootstrap.log"; exit 1; }
  rm -rf "$rootfs.tmp"/var/cache/apt/archives/*.deb "$rootfs.tmp"/var/lib/apt/lists/*
  tar -C "$rootfs.tmp" -c . | podman import --change 'CMD ["/bin/bash"]' - "$BASE" > /dev/null
  rm -rf "$rootfs.tmp"
fi

# build NAME TAG [FROM]: the context is $WORK/NAME, built FROM the CA base or the image given;
# skipped when the image carries the hash of that context, its base and the CA certificates.
build() {
  local name=$1 tag=$2 from=${3:-$CA_BASE}
  local context=$WORK/$name want
  want=$( (cd "$context" && find . -type f -print0 | sort -z | xargs -0 sha256sum; \
           podman image inspect --format '{{.Id}}' "$from"; printf '%s' "$ca_certs") | sha256sum | cut -c1-16)
  if [ "$(podman image inspect --format '{{index .Labels "org.machinedata.inputs"}}' "$tag" 2>/dev/null)" = "$want" ]; then
    say "$tag up to date"; return
  fi
  say "building $tag"
  podman build --network host --layers -q --label "org.machinedata.inputs=$want" \
    --label "org.machinedata.standin=true" --build-arg "EXTRA_CA_CERTS=$ca_certs" \
    --build-arg "BASE=$from" -t "$tag" "$context" > "$WORK/$name.build.log" 2>&1 || { tail -n 30 "$WORK/$name.build.log"; exit 1; }
}
context() {  # fresh build context from docker/standins/NAME
  rm -rf "$WORK/$1" && cp -r "docker/standins/$1" "$WORK/$1"
}

context debian-ca
build debian-ca "$CA_BASE" "$BASE"
context debian-python
build debian-python docker.io/library/python:3.11-slim-bookworm
context maven
build maven docker.io/library/maven:3.9-eclipse-temurin-17
context mosquitto
build mosquitto docker.io/library/eclipse-mosquitto:2.0.22
context prometheus
build prometheus docker.io/prom/prometheus:v2.55.1
context alertmanager
build alertmanager docker.io/prom/alertmanager:v0.25.0

context kafka
jars=$CACHE_DIR/kafka-image-jars
stamp=$(sha256sum docker/standins/kafka/pom.xml | cut -c1-16)
if [ "$(cat "$jars/.installed" 2>/dev/null)" != "$stamp" ]; then
  say "mvn: resolving docker/standins/kafka/pom.xml"
  rm -rf "$jars" && mkdir -p "$jars"
  mvn -q -B -Dstyle.color=never -f docker/standins/kafka/pom.xml dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$jars"
  echo "$stamp" > "$jars/.installed"
fi
mkdir -p "$WORK/kafka/libs" && cp "$jars"/*.jar "$WORK/kafka/libs/"
build kafka docker.io/apache/kafka:4.3.1

context influxdb
influxd=$CACHE_DIR/bin/influxd
[ -x "$influxd" ] || { echo "[images] $influxd is missing: run scripts/setup.sh first" >&2; exit 1; }
cp "$influxd" "$WORK/influxdb/influxd"
build influxdb docker.io/library/influxdb:1.8.10

# the schema registry: the distribution scripts/setup.sh unpacked from Maven Central (no download here)
context apicurio
apicurio=$ROOT/.stack/apicurio
ls "$apicurio"/apicurio-registry-app-*-runner.jar > /dev/null 2>&1 \
  || { echo "[images] $apicurio has no Apicurio Registry: run scripts/setup.sh first" >&2; exit 1; }
mkdir -p "$WORK/apicurio/app" && cp -r "$apicurio"/apicurio-registry-app-*-runner.jar "$apicurio/lib" "$WORK/apicurio/app/"
build apicurio docker.io/apicurio/apicurio-registry:3.0.9

context spark
build spark docker.io/apache/spark:4.1.1-scala2.13-java17-python3-ubuntu docker.io/library/python:3.11-slim-bookworm
say "done"
