"""scripts/convert-slurm.sbatch on a real Slurm: Debian's slurmctld and slurmd (with munge),
started by this test as a one-node cluster on localhost. The array of parts and the dependent
merge + verify job give the dataset of one `tarmac convert` run; a part preempted mid-run and
requeued by Slurm goes on from its checkpoint; a finished part requeued or resubmitted is left
as it is.

Needs root and the packages slurmctld slurmd slurm-client munge (scripts/setup-deps.sh ci), and
skips, saying which is missing, without them. Everything lives in one temporary directory; the
daemons run in the foreground as children of this test and are stopped at the end.
"""
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures as fx  # noqa: E402

SCRIPT = os.path.abspath(os.path.join(fx.HERE, "..", "..", "scripts", "convert-slurm.sbatch"))
DERIVE_SCRIPT = os.path.abspath(os.path.join(fx.HERE, "..", "..", "scripts", "derive-slurm.sbatch"))
PYTHON_DIR = os.path.abspath(os.path.join(fx.HERE, "..", "..", "python"))
PARTS = 3
OPTIONS = ["--crop", "center", "--size", "64", "--shard-size", "16K"]
PREEMPTED = 1  # the array task whose first run is preempted after its CHECKPOINTS-th checkpoint
CHECKPOINTS = 3
TIMEOUT = 180
DONE = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
        "DEADLINE", "PREEMPTED"}

# Stands in for TARMAC. The first run of task PREEMPTED converts with a checkpoint after every
# sample; after the CHECKPOINTS-th it stops tarmac and asks Slurm to requeue the task, as a
# preemption with PreemptMode=REQUEUE would: slurmd kills the job, and the task runs again.
WRAPPER = """#!/usr/bin/python3
import json, os, signal, subprocess, sys, time
real, args = os.environ["REAL_TARMAC"], sys.argv[1:]
if (args[:1] != ["convert"] or os.environ.get("SLURM_ARRAY_TASK_ID") != "%(task)d"
        or os.environ.get("SLURM_RESTART_COUNT", "0") != "0"):
    os.execv(real, [real, *args])
p = subprocess.Popen([real, *args, "--checkpoint-every", "0"])
cp = os.path.join(args[args.index("-o") + 1], ".tarmac-partial", "checkpoint.json")
while p.poll() is None:
    try:
        with open(cp) as f:
            entries = json.load(f)["entries"]
    except (OSError, ValueError, KeyError):
        entries = 0
    if entries >= %(checkpoints)d:
        p.send_signal(signal.SIGSTOP)
        with open(os.environ["PREEMPT_LOG"], "a") as f:
            f.write(json.dumps({"entries": entries}) + "\\n")
        task = os.environ["SLURM_ARRAY_JOB_ID"] + "_" + os.environ["SLURM_ARRAY_TASK_ID"]
        subprocess.run(["scontrol", "requeue", task], check=True)
        time.sleep(600)
    time.sleep(0.001)
sys.exit("wrapper: tarmac finished (exit %%d) before its checkpoint %(checkpoints)d" %% p.returncode)
""" % {"task": PREEMPTED, "checkpoints": CHECKPOINTS}


def free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def die_with_parent():
    """Runs in the child: the daemon gets SIGTERM if this test is killed (e.g. by a CTest timeout)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Cluster:
    """munged, slurmctld and slurmd of a one-node cluster, all state under `root`."""

    def __init__(self, root):
        self.root = root
        self.host = socket.gethostname().split(".")[0]
        self.procs = []
        self.env = dict(os.environ, SLURM_CONF=os.path.join(root, "slurm.conf"))
        for d in ("munge", "ctld", "spool", "log"):
            os.makedirs(os.path.join(root, d))
        os.chmod(root, 0o755)  # munged wants every directory above its socket searchable

    def path(self, *names):
        return os.path.join(self.root, *names)

    def write_conf(self):
        # CPUs and memory are configured (config_overrides), not detected: the script asks for
        # 8 CPUs and 16G per job, and Slurm 22.05 has no SBATCH_* variable for --cpus-per-task.
        conf = f"""ClusterName=tarmactest
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.path("munge", "sock")},cred_expire=5
StateSaveLocation={self.path("ctld")}
SlurmdSpoolDir={self.path("spool")}
SlurmctldPidFile={self.path("slurmctld.pid")}
SlurmdPidFile={self.path("slurmd.pid")}
SlurmctldLogFile={self.path("log", "slurmctld.log")}
SlurmdLogFile={self.path("log", "slurmd.log")}
JobCompType=jobcomp/filetxt
JobCompLoc={self.path("log", "jobcomp.txt")}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerParameters=sched_interval=1,bf_interval=1
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=2
MinJobAge=600
MpiDefault=none
MailProg=/bin/true
NodeName={self.host} NodeAddr=127.0.0.1 CPUs={8 * PARTS} RealMemory={16384 * PARTS} State=UNKNOWN
PartitionName=test Nodes={self.host} Default=YES MaxTime=INFINITE State=UP
"""
        with open(self.env["SLURM_CONF"], "w") as f:
            f.write(conf)

    def daemon(self, name, *args):
        with open(self.path("log", name + ".out"), "w") as out:
            self.procs.append((name, subprocess.Popen([name, *args], env=self.env, stdout=out,
                                                      stderr=subprocess.STDOUT, preexec_fn=die_with_parent)))

    def start(self):
        self.write_conf()
        subprocess.run(["mungekey", "--create", "--keyfile", self.path("munge", "munge.key")], check=True)
        self.daemon("munged", "--foreground", "--force", "--key-file", self.path("munge", "munge.key"),
                    "--socket", self.path("munge", "sock"), "--pid-file", self.path("munge", "munged.pid"),
                    "--seed-file", self.path("munge", "seed"), "--log-file", self.path("log", "munged.log"))
        self.wait_for(lambda: os.path.exists(self.path("munge", "sock")), "munged's socket", 20)
        self.daemon("slurmctld", "-D", "-i")
        self.daemon("slurmd", "-D", "-N", self.host)
        self.wait_for(lambda: self.ctl("sinfo", "-h", "-n", self.host, "-o", "%T", check=False) == "idle",
                      "the node to be idle", 60)

    def wait_for(self, ready, what, seconds):
        deadline = time.monotonic() + seconds
        while not ready():
            for name, p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited ({p.returncode}) while waiting for {what}\n" + self.logs())
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {seconds} s waiting for {what}\n" + self.logs())
            time.sleep(0.2)

    def ctl(self, *args, check=True):
        p = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=30)
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: exit {p.returncode}: {p.stderr}")
        return p.stdout.strip()

    def jobs(self, job):
        """{job id: record} for `job` (an array job gives one record per task)."""
        out = {}
        for line in self.ctl("scontrol", "show", "job", "-o", str(job)).splitlines():
            rec = dict(w.split("=", 1) for w in line.split() if "=" in w)
            out[rec["JobId"]] = rec
        return out

    def wait_jobs(self, *jobs, min_restarts=0):
        """Waits until every task of `jobs` has ended (a requeued one: ended again); returns their records."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            recs = {k: v for j in jobs for k, v in self.jobs(j).items()}
            if all(r["JobState"] in DONE and int(r["Restarts"]) >= min_restarts for r in recs.values()):
                return recs
            stuck = [r for r in recs.values() if r.get("Reason") == "DependencyNeverSatisfied"]
            if stuck or time.monotonic() > deadline:
                raise AssertionError(("a dependency failed" if stuck else f"timed out after {TIMEOUT} s") +
                                     "\n" + "\n".join(f"{k}: {r['JobState']} {r.get('Reason')}" for k, r in recs.items()) +
                                     "\n" + self.logs())
            time.sleep(0.3)

    def logs(self):
        text = []
        for d in (self.path("log"), self.path("work")):
            for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
                with open(os.path.join(d, name), errors="replace") as f:
                    text.append(f"---- {name}\n" + "".join(f.readlines()[-40:]))
        return "\n".join(text)

    def stop(self):
        if any(p.poll() is None for name, p in self.procs if name == "slurmctld"):
            subprocess.run(["scancel", "--full", "--user", "root"], env=self.env, capture_output=True, timeout=30)
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def make_inputs(tmp, n_archives=4, per=30):
    """Archives of PNG samples with JSON labels: an int, a string and a ragged list of points."""
    paths = []
    for a in range(n_archives):
        members = []
        for i in range(per):
            k = f"arc{a}/s{i:02d}"
            members.append((k + ".png", fx.png(fx.smooth_rgb(80 + i, 70 + 3 * a, seed=a * 100 + i))))
            members.append((k + ".json", fx.js({"id": a * 100 + i, "name": f"n{a}-{i}", "pts": [[i, 0.5]] * (1 + i % 3)})))
        paths.append(fx.write_tar(os.path.join(tmp, f"in{a}.tar"), members))
    return paths


def snapshot(d):
    """{file name: (inode, mtime_ns, bytes)} of the files in d."""
    out = {}
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if os.path.isfile(p):
            st = os.stat(p)
            with open(p, "rb") as f:
                out[name] = (st.st_ino, st.st_mtime_ns, f.read())
    return out


class SlurmTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root: this test starts slurmctld, slurmd and munged as root")
        missing = [b for b in ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo")
                   if not shutil.which(b, path=os.environ["PATH"] + ":/usr/sbin:/sbin")]
        if missing:
            raise unittest.SkipTest(f"{', '.join(missing)} not installed (apt-get install slurmctld slurmd "
                                    "slurm-client munge, or scripts/setup-deps.sh ci)")
        os.environ["PATH"] += ":/usr/sbin:/sbin"
        started = time.monotonic()
        cls.tmp = tempfile.mkdtemp(prefix="tarmac-slurm-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.cluster = Cluster(os.path.join(cls.tmp, "cluster"))
        cls.addClassCleanup(cls.cluster.stop)
        try:
            cls.cluster.start()
        except RuntimeError as e:
            # The machine cannot run the daemons (no /proc access, ports, kernel limits...):
            # an environment without Slurm, not a failure of the launcher. Say why, loudly.
            print(f"\ncould not start a one-node Slurm here:\n{e}", file=sys.stderr)
            raise unittest.SkipTest("a local Slurm did not start (its logs are printed above)")
        print(f"\nSlurm up in {time.monotonic() - started:.1f} s", file=sys.stderr)

        cls.inputs = make_inputs(cls.tmp)
        cls.single = os.path.join(cls.tmp, "single")
        p = fx.run(["convert", *cls.inputs, "-o", cls.single, *OPTIONS, "-q"])
        assert p.returncode == 0, p.stderr.decode()

        cls.work = cls.cluster.path("work")  # the jobs' working directory: their logs
        os.makedirs(cls.work)
        wrapper = os.path.join(cls.tmp, "tarmac-preempt")
        with open(wrapper, "w") as f:
            f.write(WRAPPER)
        os.chmod(wrapper, 0o755)
        cls.preempt_log = os.path.join(cls.tmp, "preempted.jsonl")
        cls.env = dict(cls.cluster.env, TARMAC=wrapper, REAL_TARMAC=os.path.abspath(fx.TARMAC),
                       PREEMPT_LOG=cls.preempt_log)
        cls.out = os.path.join(cls.tmp, "out")
        p = subprocess.run([SCRIPT, "submit", str(PARTS), cls.out, *cls.inputs, "--", *OPTIONS], env=cls.env,
                           cwd=cls.work, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        # "parts: job 1 (array 0-2); merge + verify: job 2"
        words = p.stdout.split()
        cls.array_job, cls.merge_job = words[2], words[-1]
        cls.records = cls.cluster.wait_jobs(cls.array_job, cls.merge_job)
        print(f"array job and merge job done {time.monotonic() - started:.1f} s after the start", file=sys.stderr)

    def job_log(self, job, task):
        with open(os.path.join(self.work, f"tarmac-{job}_{task}.log"), errors="replace") as f:
            return f.read()

    def test_merged_dataset_equals_one_run(self):
        states = {k: (r["JobState"], r["ExitCode"]) for k, r in self.records.items()}
        self.assertEqual(set(states.values()), {("COMPLETED", "0:0")}, f"{states}\n{self.cluster.logs()}")
        self.assertEqual(len(states), PARTS + 1)
        a, b = fx.Dataset(self.out), fx.Dataset(self.single)
        self.assertEqual(len(a.keys), 4 * 30)
        self.assertEqual(a.keys, b.keys)
        self.assertEqual(a.schema, b.schema)
        for name in a.t:  # labels and keys: every tensor but the shard positions of the images
            if not name.startswith("__image__."):
                self.assertEqual(a.t[name].tobytes(), b.t[name].tobytes(), name)
        for i, k in enumerate(a.keys):
            self.assertEqual(a.blob(i), b.blob(i), k)
        self.assertEqual([d["path"] for d in a.manifest["merged_from"]],
                         [f"{self.out}.parts/part-{i}" for i in range(PARTS)])
        # The merge job ran `tarmac verify`, which must have passed (the job exits 0 only then).
        merge_log = self.job_log(self.merge_job, 4294967294)  # %a of a job that is no array
        self.assertIn(f"\nOK {self.out}: {4 * 30} samples", merge_log)
        self.assertEqual(fx.run(["verify", self.out]).returncode, 0)

    @unittest.skipUnless(os.environ.get("TARMAC_LIB"), "needs TARMAC_LIB (the reader library) for derive")
    def test_derive_array_then_merge_and_verify(self):
        # scripts/derive-slurm.sbatch: 3 ranks as array tasks (no GPU here: DERIVE_GRES empty),
        # then merge + verify once all succeeded. The function: each image's mean colour.
        work = os.path.join(self.tmp, "derive")
        os.makedirs(work)
        with open(os.path.join(work, "meancolour.py"), "w") as f:
            f.write("def encode(batch):\n    return batch['image'].float().mean(dim=(1, 2))\n")
        env = dict(self.cluster.env, TARMAC=os.path.abspath(fx.TARMAC), PYTHON=sys.executable, DERIVE_GRES="",
                   SBATCH_MEM_PER_NODE="4G", PYTHONPATH=os.pathsep.join([PYTHON_DIR, work]))
        p = subprocess.run([DERIVE_SCRIPT, "submit", "3", self.out, "mean", "meancolour:encode", "--",
                            "--batch-size", "8"], env=env, cwd=work, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        words = p.stdout.split()  # "ranks: job 7 (array 0-2); merge + verify: job 8"
        records = self.cluster.wait_jobs(words[2], words[-1])
        states = {k: (r["JobState"], r["ExitCode"]) for k, r in records.items()}
        self.assertEqual(set(states.values()), {("COMPLETED", "0:0")}, f"{states}\n{self.cluster.logs()}")
        self.assertEqual(len(states), 4)
        with open(os.path.join(work, f"tarmac-derive-{words[-1]}_4294967294.log"), errors="replace") as f:
            self.assertIn("1 derived column(s)", f.read())
        t, meta = fx.st_reader.load(os.path.join(self.out, "columns", "mean.safetensors"))
        self.assertEqual(meta["world"], "3")
        ds = fx.Dataset(self.out)
        for i in range(len(ds.keys)):
            ref = fx.decode_rgb(ds.blob(i)).reshape(-1, 3).mean(axis=0)
            np.testing.assert_allclose(t["values"][i], ref, atol=1.0)

    def test_preempted_part_went_on_from_its_checkpoint(self):
        with open(self.preempt_log) as f:
            stops = [json.loads(line) for line in f]
        self.assertEqual(len(stops), 1)
        task = next(r for r in self.records.values() if r.get("ArrayTaskId") == str(PREEMPTED))
        self.assertEqual(task["Restarts"], "1")
        with open(os.path.join(f"{self.out}.parts", f"part-{PREEMPTED}", "manifest.json")) as f:
            m = json.load(f)
        self.assertIn("resumed", m)
        self.assertGreaterEqual(m["resumed"]["entries"], stops[0]["entries"] - 1)
        self.assertGreater(m["resumed"]["samples"], 0)
        # slurmd's SIGTERM (with SIGCONT) lets the stopped run finish what it had in flight and
        # checkpoint it (a graceful stop), so the resume may start anywhere up to the end.
        self.assertLessEqual(m["resumed"]["samples"], m["counts"]["samples"])
        self.assertIn("resumed an interrupted run", self.job_log(self.array_job, PREEMPTED))

    def rerun_leaves_part_as_is(self, task, rerun):
        """Runs finished part `task` again with `rerun(task)` -> (job id, restarts it will have);
        the part, the merged dataset and its verification stay as they were."""
        part = os.path.join(f"{self.out}.parts", f"part-{task}")
        before, out_before = snapshot(part), snapshot(self.out)
        job, restarts = rerun(task)
        recs = self.cluster.wait_jobs(job, min_restarts=restarts)
        self.assertEqual([(r["JobState"], r["ExitCode"]) for r in recs.values()], [("COMPLETED", "0:0")],
                         self.cluster.logs())
        self.assertEqual(snapshot(part), before)
        self.assertEqual(snapshot(self.out), out_before)
        self.assertEqual(fx.run(["verify", self.out]).returncode, 0)
        return recs

    def test_requeue_of_a_finished_part(self):
        job = f"{self.array_job}_0"

        def requeue(task):
            self.cluster.ctl("scontrol", "requeue", job)
            return job, 1
        recs = self.rerun_leaves_part_as_is(0, requeue)
        self.assertEqual(next(iter(recs.values()))["Restarts"], "1")

    def test_resubmit_of_a_finished_part(self):
        def resubmit(task):
            p = subprocess.run(["sbatch", "--parsable", f"--array={task}", SCRIPT, "part", str(PARTS), self.out,
                                *self.inputs, "--", *OPTIONS], env=self.env, cwd=self.work, capture_output=True,
                               text=True, timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr)
            return p.stdout.strip().split(";")[0], 0
        self.rerun_leaves_part_as_is(2, resubmit)


if __name__ == "__main__":
    unittest.main(verbosity=2)  # prints why, when the test skips
