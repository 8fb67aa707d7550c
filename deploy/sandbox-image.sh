#!/usr/bin/env bash
# `make sandbox-image`: a Docker engine, its sandbox runtimes, and a local sandbox image, on a
# Debian or Ubuntu machine, without any container registry. Safe to run again: each step
# checks first and does only what is missing. The last line printed is the image's tag.
#
#   SANDBOX_IMAGE  the tag to build (default securebench-local/python:3.11)
#   RUNTIMES       OCI runtimes to install and register with the engine (default
#                  "crun runsc"; empty: none). Sandboxes use one when
#                  SECUREBENCH_DOCKER_RUNTIME names it.
#
# The image is Debian bookworm's minimal root filesystem with python3 (also as `python`),
# pytest, git and patch, made by debootstrap from the machine's own Debian mirror and loaded
# with `docker import`: nothing comes from a registry.
set -euo pipefail

tag="${SANDBOX_IMAGE:-securebench-local/python:3.11}"
runtimes="${RUNTIMES-crun runsc}"
say() { printf 'sandbox-image: %s\n' "$*" >&2; }
root_do() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
apt_get() {
  local stamp=/tmp/.securebench-apt-updated
  [ -e "$stamp" ] || { root_do apt-get update -qq && touch "$stamp"; }
  DEBIAN_FRONTEND=noninteractive root_do apt-get install -y -qq "$@" >/dev/null
}
engine_answers() { docker info >/dev/null 2>&1; }

# 1. The engine: started by hand where no service manager runs one (containers, CI VMs).
if ! engine_answers; then
  command -v dockerd >/dev/null || { say "installing Docker (docker.io)"; apt_get docker.io; }
  if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
    root_do systemctl start docker
  else
    say "starting dockerd (log: /tmp/securebench-dockerd.log)"
    root_do sh -c 'nohup dockerd >/tmp/securebench-dockerd.log 2>&1 &'
  fi
  for _ in $(seq 60); do engine_answers && break; sleep 1; done
  engine_answers || { say "the Docker engine did not answer; see /tmp/securebench-dockerd.log"; exit 1; }
fi

# 2. Runtimes: installed from Debian, registered in daemon.json, and picked up by a SIGHUP
# (dockerd reloads its runtimes without a restart, so running containers are untouched).
# gVisor's runsc gets --network=none (sandboxes have no network, and runsc otherwise refuses
# the engine's empty network namespace) and --oci-seccomp (without it runsc ignores the
# engine's seccomp profile, and a candidate could, for one, make nested user namespaces).
register_runtime() { # name path [args, space-separated]
  local name="$1" path="$2" args="${3:-}"
  root_do python3 - "$name" "$path" "$args" <<'PY'
import json, os, sys
name, path, args = sys.argv[1:]
config = "/etc/docker/daemon.json"
data = json.load(open(config)) if os.path.exists(config) else {}
entry = {"path": path, **({"runtimeArgs": args.split()} if args else {})}
if data.get("runtimes", {}).get(name) != entry:
    data.setdefault("runtimes", {})[name] = entry
    os.makedirs(os.path.dirname(config), exist_ok=True)
    with open(config + ".new", "w") as handle:
        json.dump(data, handle, indent=2)
    os.replace(config + ".new", config)
    print("changed")
PY
}
reload=""
for runtime in $runtimes; do
  command -v "$runtime" >/dev/null || { say "installing $runtime"; apt_get "$runtime"; }
  args=""; [ "$runtime" = runsc ] && args="--network=none --oci-seccomp"
  if [ "$(register_runtime "$runtime" "$(command -v "$runtime")" "$args")" = changed ]; then
    reload=1
  fi
done
if [ -n "$reload" ]; then
  say "registering runtimes with the engine: $runtimes"
  root_do kill -HUP "$(pidof dockerd)"
  for _ in $(seq 20); do
    known="$(docker info --format '{{range $name, $_ := .Runtimes}}{{$name}} {{end}}')"
    missing=""; for runtime in $runtimes; do [[ " $known " == *" $runtime "* ]] || missing=1; done
    [ -z "$missing" ] && break; sleep 0.5
  done
fi

# 2b. crun refuses a hybrid cgroup host (v1 controllers, plus a v2 hierarchy at
# /sys/fs/cgroup/unified) while any controller sits in the v2 one: often only hugetlb, which
# the v1 side does not mount and nothing enables. Each such unused controller moves to a v1
# hierarchy of its own, where runc and the engine ignore it too.
unified=/sys/fs/cgroup/unified
if [[ " $runtimes " == *" crun "* ]] && [ -r "$unified/cgroup.controllers" ]; then
  for controller in $(cat "$unified/cgroup.controllers"); do
    if grep -qw "$controller" "$unified/cgroup.subtree_control"; then
      say "crun needs the cgroup v2 hierarchy empty, but $controller is in use there: crun left unusable"
      continue
    fi
    say "moving the unused $controller cgroup controller to a v1 hierarchy (crun on a hybrid host)"
    root_do mkdir -p "/sys/fs/cgroup/$controller"
    root_do mount -t cgroup -o "$controller" cgroup "/sys/fs/cgroup/$controller" \
      || say "could not mount $controller: crun may refuse this host"
  done
fi

# 3. The image. One made before `python` was part of it is rebuilt.
if docker image inspect "$tag" >/dev/null 2>&1 \
  && ! docker run --rm --network none "$tag" python -c pass >/dev/null 2>&1; then
  say "$tag has no \`python\`: rebuilding it"
  docker image rm -f "$tag" >/dev/null
fi
if ! docker image inspect "$tag" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || { say "installing debootstrap"; apt_get debootstrap; }
  mirror="$(sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n 1 || true)"
  [ -n "$mirror" ] || mirror="$(awk '$1 == "deb" && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)"
  [ -n "$mirror" ] || mirror="http://deb.debian.org/debian"
  rootfs="$(mktemp -d /tmp/securebench-rootfs.XXXXXX)"
  trap 'root_do rm -rf "$rootfs"' EXIT
  say "building $tag from Debian bookworm ($mirror; about a minute)"
  root_do debootstrap --variant=minbase \
    --include=python3,python-is-python3,python3-pytest,git,patch,ca-certificates \
    bookworm "$rootfs" "$mirror" >/tmp/securebench-debootstrap.log 2>&1 \
    || { say "debootstrap failed; see /tmp/securebench-debootstrap.log"; exit 1; }
  root_do tar -C "$rootfs" -c . | docker import -c 'CMD ["/bin/bash"]' - "$tag" >/dev/null
fi
docker run --rm --network none "$tag" python -c 'import pytest' >/dev/null \
  || { say "$tag does not run python with pytest"; exit 1; }
say "ready: $tag (runtimes: $(docker info --format '{{range $name, $_ := .Runtimes}}{{$name}} {{end}}'))"
echo "$tag"
