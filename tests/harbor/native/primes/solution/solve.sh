#!/bin/bash
set -euo pipefail
cd /app
python3 - <<'PY'
numbers = [int(line) for line in open("numbers.txt")]
primes = [n for n in numbers if n > 1 and all(n % d for d in range(2, n))]
open("primes.txt", "w").write("".join(f"{n}\n" for n in primes))
PY
