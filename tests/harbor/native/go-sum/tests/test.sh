#!/bin/bash
cp /tests/sum_test.go /app/sum/sum_test.go
cd /app
if go test ./sum/; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
