"""Measuring whole processes: their peak memory (under a small reaper) and
output, the machine and its BLAS, the CPU's peak as `tinygpt peak` measures
it, how a PyTorch process is started (its threads and their waiting), and
the pieces every report shares. bench, products, learn and
scripts/bench_gpt2.py use them.
"""

import os
import subprocess
import sys
import tempfile
import time
import json
import shlex

import torch

# This package's command line, which the workers run in fresh processes.
SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "torch_reference.py")
# MB as tinygpt's `memory:` line counts them: 10^6 bytes.
MB = 1e6


def loaded_blas_libraries():
    """Real paths of the BLAS libraries mapped into this process (from /proc/self/maps)."""
    found = set()
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and "blas" in os.path.basename(fields[5]).lower():
                found.add(os.path.realpath(fields[5]))
    return sorted(found)


# A child of this process starts with this process's resident size (PyTorch
# loaded: over 200 MB) as its ru_maxrss: exec keeps the high-water mark of the
# memory it replaces. So each measured command runs under a small reaper that
# starts it, waits for it with wait4 and writes its ru_maxrss (KiB) to a file.
# GNU time does that; where it is missing, this Python one does (python3 -I -S).
PYTHON_REAPER = """\
import os, sys
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{usage.ru_maxrss}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def rss_reaper(rss_file):
    """The command prefix that runs a command and writes its peak RSS in KiB to "rss_file".

    A command reads at least the reaper's own size (about 1 MB for GNU time,
    8 MB for the Python reaper): the report shows /bin/true's reading.
    """
    if os.access("/usr/bin/time", os.X_OK):
        return ["/usr/bin/time", "-f", "%M", "-o", rss_file]
    return [sys.executable, "-I", "-S", "-c", PYTHON_REAPER, rss_file]


def run_measured(command, env=None):
    """Run "command" to completion under rss_reaper, output captured.

    Returns (exit status, peak resident memory in MB or None, stdout, stderr).
    """
    with tempfile.TemporaryDirectory() as tmp, \
            tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        rss_file = os.path.join(tmp, "maxrss")
        status = subprocess.run(rss_reaper(rss_file) + command, stdout=out, stderr=err,
                                env=env, text=True).returncode
        try:
            with open(rss_file) as f:
                # GNU time puts "Command exited with non-zero status N" first on failure.
                rss_mb = int(f.read().split()[-1]) * 1024 / MB  # KiB on Linux
        except (OSError, ValueError, IndexError):
            rss_mb = None
        out.seek(0)
        err.seek(0)
        return status, rss_mb, out.read(), err.read()


def bench_fail(command, status, stderr):
    """Stop the benchmark: "command" exited with "status"; show its stderr's end."""
    print("+ " + shlex.join(command), file=sys.stderr)
    print("\n".join(stderr.splitlines()[-20:]), file=sys.stderr)
    sys.exit(f"bench: FAIL: {command[0]} exited with status {status}")


# How PyTorch's OpenMP threads wait between parallel loops: passive (sleep at
# once; without it, its spinning threads fight and it runs up to 2.6x slower
# here), and the short spin tinygpt itself uses by default (src/main.c), so
# that PyTorch gets whatever that is worth too.
TORCH_WAITS = {"PyTorch": {"OMP_WAIT_POLICY": "PASSIVE"},
               "PyTorch spin": {"GOMP_SPINCOUNT": "1000"}}


def torch_env(impl, threads):
    """The environment of a PyTorch process: the waiting of TORCH_WAITS[impl]
    and every OpenMP/BLAS thread count set to "threads" (as bench runs it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(TORCH_WAITS[impl], OMP_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    return env


def torch_cpu_capability():
    """The vectors PyTorch's own kernels use ("AVX512", "AVX2", ...), as it
    says (torch 2's get_cpu_capability), or as ATEN_CPU_CAPABILITY caps them
    (torch 1.13, Debian 12's, has no way to ask)."""
    ask = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    if ask:
        return ask()
    cap = os.environ.get("ATEN_CPU_CAPABILITY")
    return f"ATEN_CPU_CAPABILITY={cap}" if cap else "its widest"


def measure_peak(tinygpt, threads):
    """`tinygpt peak --json --threads "threads"`, parsed: the CPU's name and
    numbers and its peak GFLOP/s on 1 thread ("gflops_1_thread") and on
    "threads" ("gflops_all_threads"); the keys are listed in
    docs/speed-and-memory.md, "The peak". None when this tinygpt has no
    `peak` command (one built before it existed)."""
    command = [tinygpt, "peak", "--json", "--threads", str(threads)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode == 2 and "unknown command" in result.stderr:
        return None
    if result.returncode != 0:
        bench_fail(command, result.returncode, result.stderr)
    return json.loads(result.stdout)


def percent_of(gflops, peak_gflops):
    """"gflops" as a share of "peak_gflops", such as 87%."""
    return f"{100 * gflops / peak_gflops:.0f}%"


def machine_description():
    """A line naming the CPU (from /proc/cpuinfo) and the number of cores."""
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    usable = len(os.sched_getaffinity(0))
    return f"{model}, {os.cpu_count()} logical CPUs ({usable} usable by this process)"


def default_bench_data():
    """The default --data: the repository's default corpus, data/moby-dick.txt
    (relative to the current directory; `make data/moby-dick.txt` fetches it).
    Nothing outside the repository: a fresh clone runs bench and learn as they are."""
    repo = os.path.dirname(os.path.dirname(SCRIPT))
    return os.path.relpath(os.path.join(repo, "data", "moby-dick.txt"))


def report_header(began, peak):
    """The first lines of bench's and learn's reports, as (key, value) pairs:
    the command, the date it began ("began", time.time()), the machine, and
    the CPU's peak ("peak": measure_peak's result, or None)."""
    return [
        ("command", "`" + shlex.join([sys.executable] + sys.argv) + "`"),
        ("date", time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(began))),
        ("machine", machine_description()),
        ("CPU's peak (`tinygpt peak`)",
         f"{peak['cpu']}, {peak['vector_bits']}-bit {peak['instructions']}: "
         f"{peak['gflops_1_thread']:.1f} GFLOP/s on 1 thread, {peak['gflops_all_threads']:.1f} on "
         f"{peak['threads']}" if peak else "not measured (this tinygpt has no `peak` command)"),
    ]


def write_report(path, report):
    """Write the markdown "report" to "path", making its directory if need be."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(report)


def format_ratio(x):
    """A speed ratio such as 1.23x."""
    return f"{x:.2f}x"
