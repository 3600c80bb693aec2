"""Programs that run inside the training job (the user's NeMo container), not in the controller.

They import only the standard library at module level, so the controller (Python 3.11, no Megatron) can import
and test them; Megatron, Transformer Engine and torch are imported inside functions.
"""
