"""perf/perf_json.h's output schema for the Python drivers (compare-*).

  {"meta": {"program", "version", "commit", "host", "backend", "transport",
            "ucx_version", "command", "launcher", "ranks", "time"},
   "results": [...]}

emit() prints it as the last stdout line (--json) or writes it to a file
(--json FILE), and writes the results as CSV (--csv FILE).
"""
import csv
import json
import os
import re
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _version():
    try:
        with open(os.path.join(HERE, "..", "include", "rshuffle", "version.h")) as f:
            v = dict(re.findall(r"#define RS_VERSION_(MAJOR|MINOR|PATCH) (\d+)", f.read()))
        return "%s.%s.%s" % (v["MAJOR"], v["MINOR"], v["PATCH"])
    except (OSError, KeyError):
        return "unknown"


def _run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=HERE, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def meta(program, backend="ucx", transport="-", launcher="local", ranks=1):
    """The meta object of a run of program (this process's command line)."""
    ucx = re.search(r"Library version: (\d+\.\d+\.\d+)", _run(["ucx_info", "-v"]))
    return {"program": program, "version": _version(),
            "commit": _run(["git", "rev-parse", "--short=12", "HEAD"]).strip() or "unknown",
            "host": socket.gethostname(), "backend": backend, "transport": transport,
            "ucx_version": ucx.group(1) if ucx else "",
            "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
            "launcher": launcher, "ranks": ranks,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def add_args(ap):
    """--json [FILE] and --csv FILE on an argparse parser."""
    ap.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                    help="the JSON object as the last stdout line, or into FILE")
    ap.add_argument("--csv", metavar="FILE", help="the results as CSV into FILE")


def emit(args, m, results):
    """Writes what args.json / args.csv ask for."""
    doc = {"meta": m, "results": results}
    if args.json == "-":
        sys.stdout.flush()
        print(json.dumps(doc))
    elif args.json:
        with open(args.json, "w") as f:
            f.write(json.dumps(doc) + "\n")
    if args.csv:
        cols = []
        for r in results:
            cols += [k for k in r if k not in cols]
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            for r in results:
                w.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else v
                            for k, v in r.items()})


def last_json(stdout):
    """The JSON object on the last line of a driver's stdout."""
    return json.loads(stdout.strip().splitlines()[-1])


def loadavg():
    """The 1-minute load average, as a comparison reports it beside its ratios."""
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])
