#!/usr/bin/env bash
# clients/android against a live gateway: the gateway (debug build) on a fresh database with its embedded Desk
# emulator, then the client compiled for Java 8 (what Android's toolchain takes) against Debian's OkHttp 3 and
# Android's own org.json (libandroid-json-java), and its JUnit 4 tests run on the JVM. The client's jar is left in
# .build/android-client/. ADMIN is the test cluster's admin connection string.
set -euo pipefail
cd "$(dirname "$0")/.."
admin=$1
port=${ANDROID_CLIENT_GATEWAY_PORT:-18351} desk_port=${ANDROID_CLIENT_EMULATOR_PORT:-19351}
export ANDROID_CLIENT_PAGE_PORT=${ANDROID_CLIENT_PAGE_PORT:-19352}
database=android_client_test
libraries=/usr/share/java/okhttp.jar:/usr/share/java/okio.jar:/usr/share/java/com.android.json.jar
out=.build/android-client
rm -rf "$out" && mkdir -p "$out/classes" "$out/test-classes"
# The library first: a compile error should not wait for a gateway to start.
javac --release 8 -Xlint:all -Werror -d "$out/classes" -cp "$libraries" clients/android/src/main/java/deskgateway/*.java
jar --create --file "$out/desk-gateway-client.jar" -C "$out/classes" .
javac --release 8 -Xlint:all -Werror -d "$out/test-classes" -cp "$libraries:$out/desk-gateway-client.jar:/usr/share/java/junit4.jar" \
  clients/android/src/test/java/deskgateway/*.java

psql "$admin" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" -c "CREATE DATABASE $database" >/dev/null
log=.build/android-client-gateway.log
# A small rate-limit budget, so the client's 429 handling is reached in a few calls; previews may fetch the test's
# own page on the loopback address.
DATABASE_URL="${admin/dbname=postgres/dbname=$database}" HOST=127.0.0.1 PORT=$port DESK_EMULATOR_PORT=$desk_port \
DESK_EMULATOR_STATE=memory SYNC_INTERVAL_S=0 LOG_LEVEL=warning ASSETS_DIR="$PWD" \
RATE_LIMIT_PER_MINUTE=600 RATE_LIMIT_BURST=40 LINK_PREVIEW_ALLOW_PRIVATE=true \
  .build/debug/desk-gateway serve >"$log" 2>&1 &
gateway=$!
trap 'kill -TERM $gateway 2>/dev/null; wait $gateway 2>/dev/null; psql "$admin" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null' EXIT
for _ in $(seq 1 600); do curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
curl -fs "http://127.0.0.1:$port/readyz" >/dev/null || { echo "the gateway did not become ready"; cat "$log"; exit 1; }
DESK_GATEWAY_URL="http://127.0.0.1:$port" DESK_EMULATOR_URL="http://127.0.0.1:$desk_port" \
  java -cp "$libraries:$out/desk-gateway-client.jar:$out/test-classes:/usr/share/java/junit4.jar:/usr/share/java/hamcrest-core.jar" \
  org.junit.runner.JUnitCore deskgateway.JourneyTest
