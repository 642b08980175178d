"""The Desk emulator's cost per request as its world grows: the standalone release emulator with a state file
(every change saved before it is answered, as the embedded one saves to PostgreSQL) takes N ticket creations
(default 100,000) from a few keep-alive connections; the latency of creations, of reading one ticket and of a write
that answers with the changed ticket (the customer's cancel) is sampled at the start and at the end. Flat means the
cost follows the request, not the size of the world.
Usage: emulator_growth.py [TICKETS]   (make bench-emulator). Prints a table."""
import http.client
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import threading
import time

root = pathlib.Path(__file__).resolve().parent.parent
total = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
port = int(os.environ.get("BENCH_EMULATOR_PORT", "19097"))
workers = 4
out = root / "bench" / "out"
out.mkdir(parents=True, exist_ok=True)
state = out / "emulator-growth.jsonl"
state.unlink(missing_ok=True)


def request(conn, method, path, body=None, headers=None):
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers or {})
    response = conn.getresponse()
    data = response.read()
    return response.status, json.loads(data) if data else None


def main():
    binary = root / os.environ.get("EMULATOR_BINARY", ".build/release/desk-emulator")
    process = subprocess.Popen([str(binary), "--port", str(port), "--demo", "--state", str(state)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                status, auth = request(conn, "POST", "/sapi/customers/auth/",
                                       {"sendbirdAppId": "emulated-app", "sendbirdId": "demo-customer"},
                                       {"sendbirdAccessToken": "demo-token"})
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        token = auth["token"]
        headers = {"sendbirdDeskToken": token, "Content-Type": "application/json"}
        created = [0]
        lock = threading.Lock()
        samples = {}   # phase -> [create seconds]
        reads = {}
        writes = {}

        def phase(count):
            return "first" if count <= total * 0.05 else "last" if count > total * 0.95 else None

        def worker():
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            while True:
                with lock:
                    if created[0] >= total:
                        return
                    created[0] += 1
                    index = created[0]
                started = time.perf_counter()
                status, ticket = request(conn, "POST", "/sapi/tickets/",
                                         {"sendbirdAppId": "emulated-app", "channelName": f"growth {index}", "groupKey": "support"}, headers)
                elapsed = time.perf_counter() - started
                assert status == 201 or status == 200, (status, ticket)
                name = phase(index)
                if name:
                    started = time.perf_counter()
                    status, _ = request(conn, "GET", f"/sapi/tickets/{ticket['id']}", None, headers)
                    read = time.perf_counter() - started
                    assert status == 200, status
                    # The customer's first message puts the ticket in the queue, where a customer may cancel it.
                    status, _ = request(conn, "POST", f"/emulator/tickets/{ticket['id']}/customer-message", {"text": "hello"},
                                        {"Content-Type": "application/json"})
                    assert status == 200, status
                    started = time.perf_counter()
                    status, _ = request(conn, "PATCH", f"/sapi/tickets/{ticket['id']}/cancel", {"sendbirdAppId": "emulated-app"}, headers)
                    write = time.perf_counter() - started
                    assert status == 200, status
                    with lock:
                        samples.setdefault(name, []).append(elapsed)
                        reads.setdefault(name, []).append(read)
                        writes.setdefault(name, []).append(write)

        began = time.time()
        threads = [threading.Thread(target=worker) for _ in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.time() - began

        def ms(values, q):
            values = sorted(values)
            return values[min(len(values) - 1, int(q * len(values)))] * 1000

        print(f"{total} tickets created in {seconds:.1f} s ({total / seconds:.0f}/s), state file {state.stat().st_size / 1e6:.1f} MB")
        print("| phase | creates p50 | creates p99 | read p50 | read p99 | cancel p50 | cancel p99 |")
        print("|---|---|---|---|---|---|---|")
        for name, label in (("first", f"first 5% (world < {int(total * 0.05)})"), ("last", f"last 5% (world > {int(total * 0.95)})")):
            print(f"| {label} | {ms(samples[name], 0.5):.2f} ms | {ms(samples[name], 0.99):.2f} ms | "
                  f"{ms(reads[name], 0.5):.2f} ms | {ms(reads[name], 0.99):.2f} ms | "
                  f"{ms(writes[name], 0.5):.2f} ms | {ms(writes[name], 0.99):.2f} ms |")
        for label, values in (("create", samples), ("cancel", writes)):
            print(f"{label} p50 last/first: {statistics.median(values['last']) / statistics.median(values['first']):.2f}")
    finally:
        process.terminate()
        process.wait(timeout=10)


if __name__ == "__main__":
    main()
