#!/usr/bin/env bash
# Rebuilds static/app.js (the page, mqtt.js included) and static/sw.js
# (the service worker) from src/ with esbuild. The output is committed,
# so building chatd needs no Node.js; run this after changing anything in
# src/ and commit all. browser_test.go fails when static/app.js or
# static/sw.js is not what this script produces from src/.
#
#   web/build.sh            write static/app.js and static/sw.js
#   web/build.sh OUTDIR     write them into OUTDIR (the test's freshness check)
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-static}"
[ -d node_modules ] || npm ci --no-audit --no-fund
build() {
  ./node_modules/.bin/esbuild "$1" \
    --bundle --format="$2" --platform=browser --target=es2020 \
    --minify --legal-comments=none --charset=utf8 \
    --log-level=warning \
    --outfile="$3"
}
build src/main.js esm "$out/app.js"
# A classic script: module service workers are not in every browser.
build src/sw.js iife "$out/sw.js"
