#!/usr/bin/env bash
# Rebuilds static/app.js from src/ (mqtt.js included) with esbuild.
# The output is committed, so building chatd needs no Node.js; run this
# after changing anything in src/ and commit both. browser_test.go fails
# when static/app.js is not what this script produces from src/.
#
#   web/build.sh            write static/app.js
#   web/build.sh OUTFILE    write elsewhere (the test's freshness check)
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-static/app.js}"
[ -d node_modules ] || npm ci --no-audit --no-fund
./node_modules/.bin/esbuild src/main.js \
  --bundle --format=esm --platform=browser --target=es2020 \
  --minify --legal-comments=none --charset=utf8 \
  --log-level=warning \
  --outfile="$out"
