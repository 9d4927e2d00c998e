"""Creates N queues over one keep-alive HTTP connection; prints the rate per block."""
import http.client, json, sys, time
port, total, block = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
c = http.client.HTTPConnection("127.0.0.1", port)
rows = []
t0 = time.monotonic()
for start in range(0, total, block):
    t = time.monotonic()
    for i in range(start, start + block):
        c.request("PUT", f"/api/queues/qc-{i:07d}", body="{}", headers={"Content-Type": "application/json"})
        r = c.getresponse(); body = r.read()
        if r.status >= 300:
            sys.exit(f"queue {i}: {r.status} {body[:200]!r}")
    dt = time.monotonic() - t
    rows.append({"queues_before": start, "created": block, "seconds": round(dt, 3), "per_s": round(block / dt, 1)})
    print(json.dumps(rows[-1]), flush=True)
print(json.dumps({"total": total, "seconds": round(time.monotonic() - t0, 2), "blocks": rows}))
