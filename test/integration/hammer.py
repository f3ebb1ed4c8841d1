"""Clients pipelining requests on open connections to procctld (test/integration/restart-ride.test.ts).

Each of 3 threads keeps one connection with 8 `process list` requests in flight, and makes a new
one when it closes, until the file argv[2] exists. A request counts as taken once the kernel took
all of its bytes (sendall returned); when a send fails (the daemon shut the socket for reading),
the thread stops sending and reads what is left until the end. Prints one JSON line: how many
were taken, answered, answered `restarting`, and taken but never answered.
"""
import json
import os
import socket
import sys
import threading

path, stop_file = sys.argv[1], sys.argv[2]
totals = {"taken": 0, "answered": 0, "restarting": 0, "unanswered": 0, "connections": 0}
lock = threading.Lock()


def connection():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    taken, answered, restarting = set(), set(), 0
    next_id, buf, sending = 1, b"", True
    while True:
        if sending and os.path.exists(stop_file):
            sending = False
            s.shutdown(socket.SHUT_WR)
        while sending and len(taken) - len(answered) < 8:
            line = json.dumps({"jsonrpc": "2.0", "id": next_id, "method": "process", "params": {"action": "list"}}).encode() + b"\n"
            try:
                s.sendall(line)
            except OSError:
                sending = False
                break
            taken.add(next_id)
            next_id += 1
        try:
            chunk = s.recv(1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for l in lines:
            if not l.strip():
                continue
            m = json.loads(l)
            answered.add(m.get("id"))
            if (m.get("error") or {}).get("data", {}).get("kind") == "restarting":
                restarting += 1
    s.close()
    with lock:
        totals["connections"] += 1
        totals["taken"] += len(taken)
        totals["answered"] += len(answered & taken)
        totals["restarting"] += restarting
        totals["unanswered"] += len(taken - answered)


def run():
    while not os.path.exists(stop_file):
        connection()


threads = [threading.Thread(target=run) for _ in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(totals), flush=True)
