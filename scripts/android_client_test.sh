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
libraries=/usr/share/java/okhttp.jar:/usr/share/java/okio.jar:/usr/share/java/com.android.json.jar
out=.build/android-client
rm -rf "$out" && mkdir -p "$out/classes" "$out/test-classes"
# The library first: a compile error should not wait for a gateway to start.
javac --release 8 -Xlint:all -Werror -d "$out/classes" -cp "$libraries" clients/android/src/main/java/deskgateway/*.java
jar --create --file "$out/desk-gateway-client.jar" -C "$out/classes" .
javac --release 8 -Xlint:all -Werror -d "$out/test-classes" -cp "$libraries:$out/desk-gateway-client.jar:/usr/share/java/junit4.jar" \
  clients/android/src/test/java/deskgateway/*.java

. scripts/client_gateway.sh
start_client_gateway android_client_test "$port" "$desk_port"
DESK_GATEWAY_URL="http://127.0.0.1:$port" DESK_EMULATOR_URL="http://127.0.0.1:$desk_port" \
  java -cp "$libraries:$out/desk-gateway-client.jar:$out/test-classes:/usr/share/java/junit4.jar:/usr/share/java/hamcrest-core.jar" \
  org.junit.runner.JUnitCore deskgateway.JourneyTest
