#!/usr/bin/env python3
"""A target for the collector's bad-input tests: a few named threads that block,
plus (with --churn) threads that start and exit all the time, so an attach races
with threads coming and going. Prints "idle_target pid=P ready" and waits for stdin
to close, then exits 0 with "idle_target done" to prove it was never left stopped."""
import sys
import threading
import time

stop = threading.Event()


def blocked():
    stop.wait()


def churn():
    while not stop.is_set():
        t = threading.Thread(target=lambda: time.sleep(0.001), name="churn-child")
        t.start()
        t.join()


def main():
    workers = [threading.Thread(target=blocked, name=f"blocked-{i}") for i in range(3)]
    if "--churn" in sys.argv:
        workers += [threading.Thread(target=churn, name=f"churn-{i}") for i in range(2)]
    for w in workers:
        w.start()
    print(f"idle_target pid={__import__('os').getpid()} ready", flush=True)
    sys.stdin.read()
    stop.set()
    for w in workers:
        w.join()
    print("idle_target done", flush=True)


if __name__ == "__main__":
    main()
