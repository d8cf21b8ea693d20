#!/usr/bin/env bash
# CI: start the single-node Slurm the HPC submitter's tests run against
# (agents/runner/hpc, TestSlurm), with four fake GPUs, accounting in
# slurmdbd (sacct), and the second Linux account "alice" that jobs are
# submitted as. Idempotent; must run as root. Prints the exports the tests
# read, for `eval "$(.ci/slurm.sh)"`; the start script's own log goes to
# stderr. Stop it with ../shared/scripts/slurm-stop.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

start=""
for candidate in ../shared/scripts/slurm-start.sh /work/shared/scripts/slurm-start.sh; do
  if [ -f "$candidate" ]; then start=$candidate; break; fi
done
if [ -z "$start" ]; then
  echo "[ci] slurm-start.sh not found (looked in ../shared/scripts); the Slurm tests fail under CI=true" >&2
  exit 1
fi

SLURM_FAKE_GPUS=${SLURM_FAKE_GPUS:-4} SLURM_TEST_USERS=${SLURM_TEST_USERS-alice} \
  SLURM_ACCOUNTING=${SLURM_ACCOUNTING:-slurmdbd} bash "$start" >&2
id alice >/dev/null 2>&1 || useradd -m -s /bin/bash alice
scontrol ping | grep -q UP || { echo "[ci] slurmctld does not answer" >&2; exit 1; }

# The tests find sbatch/squeue/sacct/scancel on PATH and submit as alice.
echo "export KLIQUE_TEST_SLURM=1"
echo "export KLIQUE_TEST_SLURM_USER=alice"
