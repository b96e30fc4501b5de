#!/usr/bin/env bash
# Builds, on a machine that reaches package registries but no container registry, stand-ins of
# the official images that docker-compose.yml and the Dockerfile name (docker/standins/README.md),
# tagged with the official names. Idempotent: the Debian base is made once (debootstrap),
# Prometheus and Alertmanager are built with go once per version (a few minutes the first time),
# the builds reuse podman's layer cache, and an image whose inputs did not change is not rebuilt.
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

# --- Go: Prometheus and Alertmanager at the official images' versions ------------------------------
# go_release NAME VERSION MODULE@MODVERSION REVISION TAGS 'FILES' PACKAGE...: the release's binaries
# built as its own build does (static: CGO_ENABLED=0, the release's build tags, the version stamped
# in) from the module the Go module proxy serves, with FILES of the module's tree, into
# $CACHE_DIR/bin/NAME-VERSION; once: a directory built by the same command is kept.
go_release() {
  local name=$1 version=$2 module=$3 revision=$4 tags=$5 files=$6; shift 6
  local out=$CACHE_DIR/bin/$name-$version stamp="$name $version $module $revision $tags $files $*"
  local v=github.com/prometheus/common/version src
  if [ "$(cat "$out/.built" 2>/dev/null)" = "$stamp" ]; then say "go: $name $version present"; return; fi
  say "go: building $name $version from $module (once; minutes on 2 cores)"
  src=$(GOFLAGS= go mod download -json "$module" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$src" ] || { echo "[images] go mod download $module found no module" >&2; exit 1; }
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  # word-split on purpose: FILES is a list
  # shellcheck disable=SC2086
  (cd "$src" && CGO_ENABLED=0 GOFLAGS= go build -trimpath -buildvcs=false -tags "$tags" -o "$out.tmp/" \
     -ldflags "-s -w -X $v.Version=$version -X $v.Revision=$revision -X $v.Branch=HEAD" "$@" \
     && cp -r $files "$out.tmp/") > "$WORK/$name.go.log" 2>&1 || { tail -n 30 "$WORK/$name.go.log"; exit 1; }
  chmod -R u+w "$out.tmp" && printf '%s\n' "$stamp" > "$out.tmp/.built"
  rm -rf "$out" && mv "$out.tmp" "$out"
}
# Prometheus 2.55.1 is the module's v0.55.1 (its Go module numbers 2.x as 0.x)
go_release prometheus 2.55.1 github.com/prometheus/prometheus@v0.55.1 6d7569113f1ca814f1e149f74176656540043b8d \
  netgo,stringlabels 'documentation/examples/prometheus.yml consoles console_libraries LICENSE NOTICE' \
  ./cmd/prometheus ./cmd/promtool
go_release alertmanager 0.25.0 github.com/prometheus/alertmanager@v0.25.0 258fab7cdd551f2cf251ed0348f0ad7289aee789 \
  netgo 'examples/ha/alertmanager.yml LICENSE NOTICE' ./cmd/alertmanager ./cmd/amtool
prometheus=$CACHE_DIR/bin/prometheus-2.55.1 alertmanager=$CACHE_DIR/bin/alertmanager-0.25.0

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
# Maven as the moving tag maven:3.9-eclipse-temurin-17 carries it (3.9.16 when pinned here): the
# distribution from Maven Central, fetched once
MAVEN_VERSION=3.9.16
maven_dist=$CACHE_DIR/maven-dist/apache-maven-$MAVEN_VERSION-bin.tar.gz
if [ ! -f "$maven_dist" ]; then
  say "mvn: fetching Apache Maven $MAVEN_VERSION"
  rm -rf "$CACHE_DIR/maven-dist.tmp"
  mvn -q -B -Dstyle.color=never dependency:copy -Dartifact="org.apache.maven:apache-maven:$MAVEN_VERSION:tar.gz:bin" \
    -DoutputDirectory="$CACHE_DIR/maven-dist.tmp"
  mkdir -p "$CACHE_DIR/maven-dist" && mv "$CACHE_DIR/maven-dist.tmp/$(basename "$maven_dist")" "$maven_dist"
  rm -rf "$CACHE_DIR/maven-dist.tmp"
fi
context maven
cp "$maven_dist" "$WORK/maven/"
build maven docker.io/library/maven:3.9-eclipse-temurin-17
context mosquitto
build mosquitto docker.io/library/eclipse-mosquitto:2.0.22

# Prometheus and Alertmanager as the official images: their Go binaries (built once per version,
# above) on a busybox base
PROM_BUSYBOX=quay.io/prometheus/busybox-linux-amd64:latest
context prom-busybox
build prom-busybox "$PROM_BUSYBOX"
context prometheus
cp -r "$prometheus"/. "$WORK/prometheus/"
build prometheus docker.io/prom/prometheus:v2.55.1 "$PROM_BUSYBOX"
context alertmanager
cp -r "$alertmanager"/. "$WORK/alertmanager/"
build alertmanager docker.io/prom/alertmanager:v0.25.0 "$PROM_BUSYBOX"

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
