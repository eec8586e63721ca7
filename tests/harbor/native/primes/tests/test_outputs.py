from pathlib import Path

PRIMES = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37]


def test_the_file_exists():
    assert Path("/app/primes.txt").is_file()


def test_the_primes_in_order():
    assert [int(word) for word in Path("/app/primes.txt").read_text().split()] == PRIMES
