"""Seeds customers and tickets for the ticket-read benchmarks and writes a wrk Lua script that spreads requests
over every customer's token and tickets (BENCH_MODE=ticket: GET /v1/tickets/{id}; list: GET /v1/tickets?status=open)."""
import json
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor

gateway, emulator, customers, per_customer, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]


def call(method, url, body=None, token=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read()
        return json.loads(text) if text else None


def seed(index):
    user = f"bench-customer-{index}"
    call("POST", emulator + "/emulator/customers", {"sendbirdId": user, "accessToken": "t-" + user, "displayName": user})
    token = call("POST", gateway + "/v1/sessions", {"userId": user, "accessToken": "t-" + user})["token"]
    ids = []
    for n in range(per_customer):
        ticket = call("POST", gateway + "/v1/tickets", {"title": f"bench {n}", "userName": user, "priority": "MEDIUM",
                                                        "customFields": {"product": "desk"}}, token)
        ids.append(ticket["id"])
    # Warm both caches: the customer's list and every ticket.
    call("GET", gateway + "/v1/tickets?status=open", token=token)
    for ticket in ids:
        call("GET", gateway + f"/v1/tickets/{ticket}", token=token)
    return token, ids


with ThreadPoolExecutor(max_workers=8) as pool:
    seeded = list(pool.map(seed, range(customers)))

pairs = ",".join("{%s,%d}" % (json.dumps(token), ticket) for token, ids in seeded for ticket in ids)
tokens = ",".join(json.dumps(token) for token, _ in seeded)
with open(out, "w") as f:
    f.write(f"""
local pairs_ = {{{pairs}}}
local tokens = {{{tokens}}}
local mode = os.getenv("BENCH_MODE") or "ticket"
local i = 0
request = function()
  i = i + 1
  if mode == "list" then
    local token = tokens[(i % #tokens) + 1]
    return wrk.format("GET", "/v1/tickets?status=open", {{["Authorization"] = "Bearer " .. token}})
  end
  local p = pairs_[(i % #pairs_) + 1]
  return wrk.format("GET", "/v1/tickets/" .. p[2], {{["Authorization"] = "Bearer " .. p[1]}})
end
-- The requests as timed beside wrk's percentiles (run from the repository's root, as bench/run.sh is).
dofile("bench/latency.lua")
""")
print(f"seeded {customers} customers, {customers * per_customer} tickets")
