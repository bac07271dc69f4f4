#!/bin/sh
# Static chatd and chatctl binaries (CGO_ENABLED=0) for Linux on amd64 and
# arm64 (IoT gateways), in dist/. Run from a git clone so --version shows
# the revision (module pseudo-version, commit and time):  deploy/build.sh
set -eu
cd "$(dirname "$0")/.."
for arch in amd64 arm64; do
  for cmd in chatd chatctl; do
    CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=auto -ldflags="-s -w" \
      -o "dist/$cmd-linux-$arch" "./cmd/$cmd"
  done
done
ls -l dist/
