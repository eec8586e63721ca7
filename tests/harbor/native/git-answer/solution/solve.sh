#!/bin/bash
set -euo pipefail
cd /app/repo
git log --format=%s | grep -c '^fix' > answer.txt
git add answer.txt
git -c user.email=agent@example.com -c user.name=agent commit -qm answer
