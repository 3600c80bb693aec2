"""One waiting run rule, as in the workflow, for the sacct load test: `python load_waiter.py JOB_ID FOLDER STATE_DIR
INTERVAL_S`. Uses the run rule's own SlurmWaiter (result pickle first, shared sacct cache); prints how it ended."""

import sys

from graphsweep.run.slurmstate import InfraFailure, SlurmStateCache, WaitLimits
from graphsweep.run.watch import SlurmWaiter

job_id, folder, state_dir, interval_s = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
cache = SlurmStateCache(state_dir, min_interval_s=interval_s)
limits = WaitLimits(poll_s=2.0, status_interval_s=interval_s, progress_interval_s=3600, result_grace_s=3)
waiter = SlurmWaiter(f"load-{job_id}", {"job_id": job_id, "folder": folder}, cache, say=lambda _: None, limits=limits)
try:
    print(f"result {waiter.wait()}", flush=True)
except InfraFailure as exc:
    print(f"infra {exc.state}", flush=True)
