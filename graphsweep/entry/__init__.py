"""Programs that run inside the training job (the user's NeMo container), not in the controller: the job's own
wrapper (job.py: the training command, its facts for run.json), the ABBA driver of a pair job (abba.py), the
training entries and their GPU-busy and host-time probes.

They import only the standard library at module level, so the controller (Python 3.11, no Megatron) can import
and test them; Megatron, Transformer Engine and torch are imported inside functions.
"""
