"""Loaded by python3 (on PYTHONPATH) only in the ASan phase of scripts/ci-sanitize.sh.

GCC 12's ASan runtime does not hold its allocator locks across fork(): a thread of the parent
that is inside the allocator when another forks (a thread ending does so: ASan drains its cache)
leaves the lock held in the child forever, and the child's first allocation hangs
(llvm/llvm-project#63224; LLVM 17's runtime takes the locks in an atfork handler). torch's
DataLoader forks its workers from a process with threads (the previous epoch's pin-memory
thread among them), so a worker hung once in about 50 runs. Workers started from a single-threaded
fork server run the same worker code (the same libtarmac calls, checked by ASan) without it.
The other phases keep the default start method, fork."""
import multiprocessing

multiprocessing.set_start_method("forkserver")
