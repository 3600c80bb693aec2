"""Stage plug-ins: the kinds of training a sweep can run, behind one protocol (workloads/base.py).

    builtin          the small PyTorch GPT shipped here (its trainer: graphsweep/entry/builtin_gpt.py)
    megatron_bridge  real Megatron Bridge training (its entry: graphsweep/entry/megatron_entry.py)
    paired           the ABBA wrapper: both arms of a cell in one job
    registry         workload_for(kind), for_run(run)
    bridge_check     `preflight: megatron`: Bridge's own config validator on a CPU
"""
