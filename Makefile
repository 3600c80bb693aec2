# Two entry points for a fresh machine (see README):
#   make sweep      set up and run the default sweep end to end (local executor, builtin workload)
#   make test       set up (system packages, local Slurm cluster) and run every test
#   make test-fast  the in-process unit tests only (no torch, Snakemake, Slurm or Chromium process): docs/running.md "Tests" times it
VENV ?= .venv
PY := $(VENV)/bin/python
CORES ?= 2

.PHONY: sweep test test-fast install system slurm lint clean-results megatron-venv

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	# The builtin workload needs torch; a CPU build is enough off the GPU cluster (pinned: the newest is a multi-GB CUDA build).
	$(PY) -m pip install -q torch==2.13.0
	# graphsweep ships the Slurm profile's executor too (snakemake_executor_plugin_graphsweep, pyproject.toml); the
	# separate plugin distribution of earlier versions would shadow it: gone
	$(PY) -m pip uninstall -q -y snakemake-executor-plugin-graphsweep 2>/dev/null || true
	$(PY) -m pip install -q -e '.[builtin,test]'
	touch $@

install: $(VENV)/.installed

sweep: install
	$(VENV)/bin/snakemake --cores $(CORES) --quiet rules host

system:
	bash .ci/install-system.sh

slurm: system
	bash tests/slurm/local-cluster.sh start

# Every test, in three lanes (tests/lane/lanes.py): the slurm lane (sleep-bound) beside the cpu lane (pytest-xdist, one
# worker a core), then the megatron lane; each prints its slowest tests and a timed line
test: install slurm
	PATH=$(abspath $(VENV))/bin:$$PATH $(PY) tests/lane/lanes.py

# tests/conftest.py --lane fast: deselects the tests marked slow/snakemake/torch/chromium/slurm/megatron, 60 s a test;
# two pytest-xdist workers, one a core (the lane is ~150 s of CPU)
test-fast: install
	$(PY) -m pytest --lane fast -q -n 2

# Megatron Bridge's own config validator on the CPU (Python 3.12; `preflight: megatron` and the live truth check)
megatron-venv:
	bash tools/megatron-venv.sh $${MEGATRON_VENV_DIR:-$$HOME/mbvenv}

# snakefmt-clean; snakemake --lint reports only the declined conda/container lint (docs/running.md)
lint: install
	$(VENV)/bin/snakefmt --check Snakefile rules/
	-$(VENV)/bin/snakemake --lint

# Everything of the default sweep but its archives (results/default/archive/*.tar.gz: graphsweep never deletes one)
clean-results:
	if [ -d results/default ]; then find results/default -mindepth 1 -maxdepth 1 ! -name archive -exec rm -rf {} +; fi
	rm -rf .snakemake
