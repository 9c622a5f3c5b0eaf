"""Preloads a tally server with N entries for the console's page-load
benchmark: payments and usage debits with a meter and a day, over 10,000
accounts, 1,000 per POST /v1/batch, 4 clients.

    TALLY_URL=http://127.0.0.1:18080 TALLY_KEY=... python3 preload.py 1000000
"""
import json, os, sys, threading, urllib.request, time
key = os.environ["TALLY_KEY"]
url = os.environ.get("TALLY_URL", "http://127.0.0.1:18080")
N = int(sys.argv[1]); BATCH = 1000; THREADS = 4
def post(ops):
    req = urllib.request.Request(url + '/v1/batch', data=json.dumps({"operations": ops}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        assert r.status == 200
counter = iter(range(N // BATCH))
lock = threading.Lock()
def work():
    while True:
        with lock:
            b = next(counter, None)
        if b is None: return
        ops = []
        for i in range(BATCH):
            n = b * BATCH + i
            acct = f"cust_{n % 10000:05d}"
            if n % 20 == 0:
                ops.append({"type": "payment", "payment_id": f"p{n}", "account": acct, "amount": "100", "unit": "USD"})
            else:
                day = 1 + n % 28
                ops.append({"type": "usage_debit", "usage_record_id": f"u{n}", "account": acct, "amount": f"0.{n % 997:03d}1", "unit": "USD",
                            "meter": "llm-tokens", "quantity": str(n % 5000), "occurred_at": f"2026-11-{day:02d}T12:00:00Z"})
        post(ops)
t0 = time.time()
ts = [threading.Thread(target=work) for _ in range(THREADS)]
[t.start() for t in ts]; [t.join() for t in ts]
print(f"{N} entries in {time.time()-t0:.0f} s")
