#!/bin/bash
cat > /app/client.py <<'PY'
import urllib.request


def quote(n):
    with urllib.request.urlopen(f"http://quotes.internal:7080/quote/{n}", timeout=10) as answer:
        return answer.read().decode().upper()
PY
