#!/bin/bash
awk '{ sum += $1 } END { print sum }' /app/numbers.txt > /app/answer.txt
