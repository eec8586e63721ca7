#!/bin/bash
# Builds the program into /tmp and scores the share of cases it gets right.
gcc -O2 -o /tmp/words /app/words.c || { echo 0 > /logs/verifier/reward.txt; exit 0; }
passed=0
total=0
for input in /tests/cases/*.txt; do
  total=$((total + 1))
  expected=$(cat "${input%.txt}.expected")
  got=$(/tmp/words < "$input")
  if [ "$got" = "$expected" ]; then
    passed=$((passed + 1))
    echo "ok   $(basename "$input")"
  else
    echo "FAIL $(basename "$input"): got $got, want $expected"
  fi
done
awk -v p="$passed" -v t="$total" 'BEGIN { printf "%g\n", p / t }' > /logs/verifier/reward.txt
