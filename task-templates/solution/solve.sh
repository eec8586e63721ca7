#!/bin/bash
# The reference solution: Harbor's `oracle` agent runs this in the agent's container.
# Leave the finished work in {{workdir}}: that directory is what the verifier grades.
set -euo pipefail
mkdir -p {{workdir}}
cd {{workdir}}

# ... do the task here ...
