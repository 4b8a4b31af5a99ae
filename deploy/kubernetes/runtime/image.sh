#!/usr/bin/env bash
# image.sh: build batchtune's image for the manifests beside this file
# (Containerfile: the static binary in a scratch image) with podman, and
# import it into the test cluster's containerd, as
# deploy/kubernetes/cluster/up.sh imports the stand-in. Does nothing more
# when containerd already has this very image (podman's image ID) under its
# name. Prints the image's name. Needs root (podman, ctr); the cluster's
# containerd socket is $BATCHTUNE_K8S_CONTAINERD (up.sh writes it into
# /var/lib/batchtune-k8s/env).
set -euo pipefail
export PATH=/usr/local/go/bin:/usr/sbin:/sbin:$PATH
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
IMAGE=${BATCHTUNE_IMAGE:-localhost/batchtune:dev}
SOCK=${BATCHTUNE_K8S_CONTAINERD:-/run/batchtune-k8s/containerd.sock}
say() { echo "image.sh: $*" >&2; }
ctr() { command ctr -a "$SOCK" -n k8s.io "$@"; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -C "$repo" -trimpath -ldflags='-s -w' -o "$work/batchtune" ./cmd/batchtune
mkdir -p "$work/rootfs/var/lib"
cp -r "$repo/deploy/docker/rootfs/var/lib/batchtune" "$work/rootfs/var/lib/"
# Fixed times: an unchanged binary then hits podman's cache and keeps its
# image ID, so nothing is imported again.
find "$work" -exec touch -h -d @0 {} +
podman build --quiet -t "$IMAGE" -f "$here/Containerfile" "$work" >/dev/null
id=$(podman image inspect --format '{{.Id}}' "$IMAGE")

# containerd lists an imported image under its name and under its config's
# digest (podman's image ID), both with the same manifest digest.
digest_of() { ctr images ls | awk -v r="$1" '$1 == r {print $3}'; }
named=$(digest_of "$IMAGE")
byid=$(digest_of "sha256:$id")
if [ -n "$named" ] && [ "$named" = "$byid" ]; then
  say "$IMAGE (${id:0:12}) is in the cluster already"
else
  say "importing $IMAGE (${id:0:12})"
  podman save --quiet --format docker-archive -o "$work/archive.tar" "$IMAGE"
  ctr images import "$work/archive.tar" >/dev/null
fi
echo "$IMAGE"
