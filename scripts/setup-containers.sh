#!/usr/bin/env bash
# Installs a Docker-compatible container toolchain on Debian 12 without Docker: Podman (apt),
# Docker Compose v2 (built from the Go module proxy; `go install` refuses its go.mod), the compose
# CLI plugin for the docker client if there is one. Idempotent: each step is skipped when done.
# Then: `python -m stacktools.compose.engine start` (the API socket and the healthcheck
# ticker) and scripts/container-images.sh (the images). See docs/containers.md.
set -euo pipefail
# --help answers at once (this header), without installing anything.
case " $* " in *" --help "* | *" -h "*)
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
esac
cd "$(dirname "$0")/.."
CACHE_DIR=${STACK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/machinedata-stack}
COMPOSE_VERSION=v2.40.3
COMPOSE=$CACHE_DIR/bin/docker-compose
say() { printf '[setup-containers] %s\n' "$*"; }
need_sudo() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
mkdir -p "$CACHE_DIR/bin"

# --- apt: podman and what it needs on such a VM (runc: crun refuses hybrid cgroups; iptables for netavark)
packages="podman catatonit uidmap slirp4netns fuse-overlayfs runc netavark aardvark-dns iptables debootstrap"
missing=$(for p in $packages; do dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || echo "$p"; done)
if [ -z "$missing" ]; then
  say "apt: podman and its helpers present"
else
  say "apt: installing $(echo $missing)"
  need_sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive need_sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# --- Docker Compose v2 ---------------------------------------------------------------------------
if [ -x "$COMPOSE" ] && [ "$(cat "$COMPOSE.version" 2>/dev/null)" = "$COMPOSE_VERSION" ]; then
  say "compose: $COMPOSE_VERSION present"
else
  say "compose: building $COMPOSE_VERSION from the Go module proxy (about 5 minutes on 2 cores)"
  (cd "$CACHE_DIR" && go mod download "github.com/docker/compose/v2@$COMPOSE_VERSION")
  src=$(go env GOMODCACHE)/github.com/docker/compose/v2@$COMPOSE_VERSION
  (cd "$src" && GOFLAGS=-mod=mod go build -trimpath \
     -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION" -o "$COMPOSE.tmp" ./cmd)
  mv "$COMPOSE.tmp" "$COMPOSE"
  echo "$COMPOSE_VERSION" > "$COMPOSE.version"
fi
# `docker compose` as users type it, where a docker client exists.
mkdir -p "$HOME/.docker/cli-plugins"
ln -sfn "$COMPOSE" "$HOME/.docker/cli-plugins/docker-compose"
say "done ($COMPOSE; docker compose $(command -v docker >/dev/null && echo 'plugin linked' || echo 'needs a docker client'))"
