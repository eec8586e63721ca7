package sum

import (
	"os"
	"testing"
)

func TestTheImageEnvironment(t *testing.T) {
	if os.Getenv("SUM_CHECK") != "strict" {
		t.Fatalf("SUM_CHECK is %q: the tests run with the image's ENV", os.Getenv("SUM_CHECK"))
	}
}

func TestSum(t *testing.T) {
	cases := map[int][]int{0: {}, 5: {5}, 6: {1, 2, 3}, -1: {2, -3}}
	for want, numbers := range cases {
		if got := Sum(numbers...); got != want {
			t.Errorf("Sum(%v) = %d, want %d", numbers, got, want)
		}
	}
}
