"""Target for pystacks tests: a thread named "dataloader" blocked in queue.get,
N idle threads blocked in Event.wait, and the main thread in nested functions
blocked on a lock. The tests find lines by the "# MARK:" comments."""
import os
import queue
import sys
import threading
import time

extra_threads = int(sys.argv[1]) if len(sys.argv) > 1 else 0
batches = queue.Queue()
never = threading.Event()


def consume():
    return batches.get()  # MARK:consume


class Dataloader(threading.Thread):
    def run(self):
        consume()  # MARK:run


def idle():
    never.wait()  # MARK:idle


def inner(lock):
    lock.acquire()  # MARK:inner


def outer(lock):
    inner(lock)  # MARK:outer


def main():
    Dataloader(name="dataloader", daemon=True).start()
    for i in range(extra_threads):
        threading.Thread(target=idle, name=f"idle-{i}", daemon=True).start()
    lock = threading.Lock()
    lock.acquire()
    # Let every thread reach its wait before the test stops the process.
    time.sleep(0.3)
    print(f"pystacks-target pid={os.getpid()} ready", flush=True)
    outer(lock)  # MARK:main


main()  # MARK:module
