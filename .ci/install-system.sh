#!/usr/bin/env bash
# System packages CI needs on a fresh Debian 12 (bookworm), run as root:
#   - Slurm 22.05 + munge + slurmdbd + MariaDB for the local cluster (tests/slurm/local-cluster.sh)
#   - chromium (+ fonts) for the report screenshot test
#   - Python 3.11 with venv/pip, git, procps for the project itself
# Services are NOT started here (no systemd in CI); tests/slurm/local-cluster.sh start does that.
set -euo pipefail

log() { printf '[install-system] %s\n' "$*"; }

[[ $(id -u) -eq 0 ]] || { echo "[install-system] ERROR: run as root (CI does); locally: sudo bash .ci/install-system.sh" >&2; exit 1; }
if ! grep -q 'bookworm' /etc/os-release 2>/dev/null; then
    log "warning: not Debian 12 (bookworm); package names may differ"
fi

export DEBIAN_FRONTEND=noninteractive

PACKAGES=(
    # Slurm with accounting: sacct is how submitit and Snakemake's Slurm plugin read job states.
    slurmctld slurmd slurm-client slurmdbd munge mariadb-server mariadb-client
    # Report screenshot test; fonts so text renders (Recommends are off).
    chromium fonts-liberation fonts-dejavu-core
    # Project tooling.
    python3 python3-venv python3-pip python3-dev git ca-certificates procps hostname build-essential
)

# A second call (make test after .ci/run's own `make system`, or on a developer's machine) finds everything installed
# and asks no registry.
missing=()
for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]} == 0)); then
    log "all ${#PACKAGES[@]} packages installed already"
    exit 0
fi

# Keep package postinst scripts from starting munge/mariadb/slurm through invoke-rc.d: in a container
# they would either fail or leave daemons that local-cluster.sh did not start and cannot stop.
POLICY=/usr/sbin/policy-rc.d
created_policy=0
if [[ ! -e $POLICY ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$POLICY"
    chmod 0755 "$POLICY"
    created_policy=1
    log "wrote $POLICY (no service starts during install)"
fi
cleanup() { if ((created_policy)); then rm -f "$POLICY"; fi; }
trap cleanup EXIT

log "apt-get update"
apt-get update -q
log "apt-get install ${PACKAGES[*]}"
apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"

log "installed: $(dpkg-query -W -f '${Package} ${Version}, ' slurmctld munge mariadb-server chromium python3 | sed 's/, $//')"
