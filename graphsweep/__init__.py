"""graphsweep: sweep CUDA Graph configurations for Megatron Bridge training, with honest verdicts."""

__version__ = "0.1.0"
