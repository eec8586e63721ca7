#!/bin/bash
cd /app
if python3 /tests/check_client.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
